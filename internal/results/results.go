// Package results stores experiments in a SQLite database: the plan, the
// arms, every trial with its fingerprint and per-second samples, and the
// decision, so that every verdict can be recomputed later from the raw data.
// It uses a pure-Go SQLite driver: dbhost stays one static binary.
package results

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DefaultPath is where results live unless --db says otherwise.
const DefaultPath = "/var/lib/dbhost/results.db"

// Experiment statuses.
const (
	Running     = "running"
	Done        = "done"
	Failed      = "failed"
	Interrupted = "interrupted" // killed; 'dbhost experiment recover' marks it so
)

// Experiment is one run of a plan.
type Experiment struct {
	ID       string    `json:"id"`
	Name     string    `json:"name"`
	Created  time.Time `json:"created"`
	Finished time.Time `json:"finished,omitzero"`
	Status   string    `json:"status"`
	// Plan, Host and Decision are stored as the JSON the caller gives:
	// the experiment package owns their shape.
	Plan     json.RawMessage `json:"plan,omitempty"`
	Host     json.RawMessage `json:"host,omitempty"`
	Decision json.RawMessage `json:"decision,omitempty"`
	Note     string          `json:"note,omitempty"`
	Arms     []Arm           `json:"arms"`
}

// Arm is one setting under test.
type Arm struct {
	Index int      `json:"index"`
	Name  string   `json:"name"`
	Knobs []string `json:"knobs"`
}

// Trial is one measured run of one arm.
type Trial struct {
	Seq      int       `json:"seq"`   // order of execution, from 0
	Block    int       `json:"block"` // randomisation block
	Arm      int       `json:"arm"`
	Clients  int       `json:"clients,omitempty"` // sweep point
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// OpsPerSec is the trial's one sample (throughput over the measured
	// window, warm-up excluded).
	OpsPerSec    float64         `json:"ops_per_sec"`
	P50          time.Duration   `json:"p50_ns"`
	P95          time.Duration   `json:"p95_ns"`
	P99          time.Duration   `json:"p99_ns"`
	Transactions int64           `json:"transactions"`
	Errors       int64           `json:"errors"`
	Fingerprint  json.RawMessage `json:"fingerprint,omitempty"`
	// Excluded says why the trial does not count (fingerprint drift,
	// failed run); empty when it counts.
	Excluded string   `json:"excluded,omitempty"`
	Output   string   `json:"output,omitempty"` // tail of the driver's output
	Seconds  []Second `json:"seconds,omitempty"`
}

// Second is one per-second sample of a trial.
type Second struct {
	At     float64 `json:"at"` // seconds since the measured window began
	Ops    float64 `json:"ops"`
	Errors int64   `json:"errors,omitempty"`
}

// Summary is one line of List.
type Summary struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Created time.Time `json:"created"`
	Status  string    `json:"status"`
	Arms    int       `json:"arms"`
	Trials  int       `json:"trials"`
	// Verdict is decision.verdict when the decision holds one.
	Verdict string `json:"verdict,omitempty"`
}

// Store is an open results database.
type Store struct {
	db   *sql.DB
	path string
}

// schema is versioned with PRAGMA user_version; each entry migrates from
// the previous version.
var schema = []string{
	`CREATE TABLE experiments (
		id TEXT PRIMARY KEY,
		name TEXT NOT NULL,
		created INTEGER NOT NULL,
		finished INTEGER,
		status TEXT NOT NULL,
		plan TEXT, host TEXT, decision TEXT, note TEXT
	);
	CREATE TABLE arms (
		experiment TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
		idx INTEGER NOT NULL,
		name TEXT NOT NULL,
		knobs TEXT NOT NULL,
		PRIMARY KEY (experiment, idx)
	);
	CREATE TABLE trials (
		experiment TEXT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
		seq INTEGER NOT NULL,
		block INTEGER NOT NULL,
		arm INTEGER NOT NULL,
		clients INTEGER NOT NULL DEFAULT 0,
		started INTEGER NOT NULL,
		finished INTEGER NOT NULL,
		ops_per_sec REAL NOT NULL,
		p50_ns INTEGER, p95_ns INTEGER, p99_ns INTEGER,
		transactions INTEGER NOT NULL,
		errors INTEGER NOT NULL,
		fingerprint TEXT,
		excluded TEXT NOT NULL DEFAULT '',
		output TEXT,
		PRIMARY KEY (experiment, seq)
	);
	CREATE TABLE seconds (
		experiment TEXT NOT NULL,
		seq INTEGER NOT NULL,
		at REAL NOT NULL,
		ops REAL NOT NULL,
		errors INTEGER NOT NULL DEFAULT 0,
		FOREIGN KEY (experiment, seq) REFERENCES trials(experiment, seq) ON DELETE CASCADE
	);
	CREATE INDEX seconds_trial ON seconds(experiment, seq);`,
}

// Open opens (creating when needed) the results database at path. The
// directory is made 0700 and the file 0600: results name hosts, devices and
// settings.
func Open(path string) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	// Create the file first so its mode is ours, not the driver's umask-based one.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	f.Close()
	dsn := "file:" + path + "?_pragma=foreign_keys(1)&_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	s := &Store{db: db, path: path}
	if err := s.migrate(); err != nil {
		db.Close()
		return nil, fmt.Errorf("results %s: %w", path, err)
	}
	return s, nil
}

// ErrNoDatabase is returned by OpenReadOnly when there is no database yet.
var ErrNoDatabase = errors.New("no results database")

// OpenReadOnly opens an existing results database for reading only: it
// creates no directory and no file, runs no migration and changes nothing
// (list, show, compare and report must not write). A database that does not
// exist yet is ErrNoDatabase.
func OpenReadOnly(path string) (*Store, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%w at %s", ErrNoDatabase, path)
	case err != nil:
		return nil, fmt.Errorf("results: %w", err)
	case !st.Mode().IsRegular():
		return nil, fmt.Errorf("results: %s is not a regular file", path)
	}
	// mode=ro keeps SQLite from writing the database, but on a WAL
	// database it still creates the -wal and -shm files. Without a -wal
	// file no writer is active (the last one to close removes it), so the
	// file is opened immutable: SQLite then creates nothing. With one, a
	// writer is running and its -shm already exists.
	dsn := "file:" + path + "?mode=ro&_pragma=busy_timeout(5000)&_pragma=query_only(1)"
	if _, err := os.Lstat(path + "-wal"); errors.Is(err, fs.ErrNotExist) {
		dsn = "file:" + path + "?mode=ro&immutable=1&_pragma=query_only(1)"
	}
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	s := &Store{db: db, path: path}
	var v int
	if err := db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		db.Close()
		return nil, fmt.Errorf("results %s: %w", path, err)
	}
	if v != len(schema) {
		db.Close()
		if v > len(schema) {
			return nil, fmt.Errorf("results %s: written by a newer dbhost (schema %d, this one knows %d)", path, v, len(schema))
		}
		return nil, fmt.Errorf("results %s: schema %d is older than this dbhost's %d; the next experiment upgrades it", path, v, len(schema))
	}
	return s, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func (s *Store) migrate() error {
	var v int
	if err := s.db.QueryRow(`PRAGMA user_version`).Scan(&v); err != nil {
		return err
	}
	if v > len(schema) {
		return fmt.Errorf("written by a newer dbhost (schema %d, this one knows %d)", v, len(schema))
	}
	for ; v < len(schema); v++ {
		tx, err := s.db.Begin()
		if err != nil {
			return err
		}
		if _, err := tx.Exec(schema[v]); err != nil {
			tx.Rollback()
			return fmt.Errorf("schema %d: %w", v+1, err)
		}
		if _, err := tx.Exec(fmt.Sprintf(`PRAGMA user_version = %d`, v+1)); err != nil {
			tx.Rollback()
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	return nil
}

// NewID returns a sortable, unique experiment ID: UTC time and 3 random bytes.
func NewID(t time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return t.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// Create stores a new experiment with its arms. An empty ID is assigned.
func (s *Store) Create(ctx context.Context, e *Experiment) error {
	if e.Created.IsZero() {
		e.Created = time.Now()
	}
	if e.ID == "" {
		e.ID = NewID(e.Created)
	}
	if e.Status == "" {
		e.Status = Running
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO experiments(id, name, created, status, plan, host, note) VALUES (?,?,?,?,?,?,?)`,
		e.ID, e.Name, e.Created.UnixNano(), e.Status, nullJSON(e.Plan), nullJSON(e.Host), e.Note); err != nil {
		return fmt.Errorf("results: create %s: %w", e.ID, err)
	}
	for _, a := range e.Arms {
		k, _ := json.Marshal(a.Knobs)
		if _, err := tx.ExecContext(ctx, `INSERT INTO arms(experiment, idx, name, knobs) VALUES (?,?,?,?)`, e.ID, a.Index, a.Name, string(k)); err != nil {
			return fmt.Errorf("results: arm %q: %w", a.Name, err)
		}
	}
	return tx.Commit()
}

// AddTrial stores one trial and its per-second samples atomically.
func (s *Store) AddTrial(ctx context.Context, id string, t *Trial) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO trials(experiment, seq, block, arm, clients, started, finished, ops_per_sec,
		p50_ns, p95_ns, p99_ns, transactions, errors, fingerprint, excluded, output) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		id, t.Seq, t.Block, t.Arm, t.Clients, t.Started.UnixNano(), t.Finished.UnixNano(), t.OpsPerSec,
		int64(t.P50), int64(t.P95), int64(t.P99), t.Transactions, t.Errors, nullJSON(t.Fingerprint), t.Excluded, t.Output); err != nil {
		return fmt.Errorf("results: trial %d: %w", t.Seq, err)
	}
	st, err := tx.PrepareContext(ctx, `INSERT INTO seconds(experiment, seq, at, ops, errors) VALUES (?,?,?,?,?)`)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, sec := range t.Seconds {
		if _, err := st.ExecContext(ctx, id, t.Seq, sec.At, sec.Ops, sec.Errors); err != nil {
			return fmt.Errorf("results: trial %d samples: %w", t.Seq, err)
		}
	}
	return tx.Commit()
}

// Exclude marks a stored trial as not counting, with the reason.
func (s *Store) Exclude(ctx context.Context, id string, seq int, reason string) error {
	return s.exec1(ctx, `UPDATE trials SET excluded = ? WHERE experiment = ? AND seq = ?`, reason, id, seq)
}

// Finish records the end state and the decision.
func (s *Store) Finish(ctx context.Context, id, status string, decision json.RawMessage, note string) error {
	return s.exec1(ctx, `UPDATE experiments SET status = ?, finished = ?, decision = ?, note = ? WHERE id = ?`,
		status, time.Now().UnixNano(), nullJSON(decision), note, id)
}

func (s *Store) exec1(ctx context.Context, q string, args ...any) error {
	r, err := s.db.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if n, _ := r.RowsAffected(); n != 1 {
		return fmt.Errorf("results: %w", ErrNotFound)
	}
	return nil
}

// ErrNotFound: no experiment (or trial) matches.
var ErrNotFound = errors.New("no such experiment")

// List returns every experiment, newest first.
func (s *Store) List(ctx context.Context) ([]Summary, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT e.id, e.name, e.created, e.status, e.decision,
		(SELECT count(*) FROM arms a WHERE a.experiment = e.id),
		(SELECT count(*) FROM trials t WHERE t.experiment = e.id)
		FROM experiments e ORDER BY e.created DESC, e.id DESC`)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	defer rows.Close()
	var out []Summary
	for rows.Next() {
		var sm Summary
		var created int64
		var decision sql.NullString
		if err := rows.Scan(&sm.ID, &sm.Name, &created, &sm.Status, &decision, &sm.Arms, &sm.Trials); err != nil {
			return nil, err
		}
		sm.Created = time.Unix(0, created)
		if decision.Valid {
			var d struct {
				Verdict string `json:"verdict"`
			}
			if json.Unmarshal([]byte(decision.String), &d) == nil {
				sm.Verdict = d.Verdict
			}
		}
		out = append(out, sm)
	}
	return out, rows.Err()
}

// Resolve turns a unique ID prefix (or "last") into an experiment ID.
func (s *Store) Resolve(ctx context.Context, ref string) (string, error) {
	if ref == "last" || ref == "latest" {
		var id string
		err := s.db.QueryRowContext(ctx, `SELECT id FROM experiments ORDER BY created DESC, id DESC LIMIT 1`).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return "", ErrNotFound
		}
		return id, err
	}
	if ref == "" || strings.ContainsAny(ref, "%_") {
		return "", fmt.Errorf("%w: %q", ErrNotFound, ref)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM experiments WHERE id LIKE ? || '%' ORDER BY id LIMIT 2`, ref)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return "", err
		}
		ids = append(ids, id)
	}
	switch len(ids) {
	case 0:
		return "", fmt.Errorf("%w: %q", ErrNotFound, ref)
	case 1:
		return ids[0], rows.Err()
	}
	return "", fmt.Errorf("%q is ambiguous (%s, %s, ...)", ref, ids[0], ids[1])
}

// Get loads an experiment with its arms and trials (with samples).
func (s *Store) Get(ctx context.Context, ref string) (*Experiment, []Trial, error) {
	id, err := s.Resolve(ctx, ref)
	if err != nil {
		return nil, nil, err
	}
	e := &Experiment{ID: id}
	var created int64
	var finished sql.NullInt64
	var plan, hostJSON, decision, note sql.NullString
	if err := s.db.QueryRowContext(ctx, `SELECT name, created, finished, status, plan, host, decision, note FROM experiments WHERE id = ?`, id).
		Scan(&e.Name, &created, &finished, &e.Status, &plan, &hostJSON, &decision, &note); err != nil {
		return nil, nil, fmt.Errorf("results: %w", err)
	}
	e.Created = time.Unix(0, created)
	if finished.Valid {
		e.Finished = time.Unix(0, finished.Int64)
	}
	e.Plan, e.Host, e.Decision, e.Note = raw(plan), raw(hostJSON), raw(decision), note.String
	arms, err := s.db.QueryContext(ctx, `SELECT idx, name, knobs FROM arms WHERE experiment = ? ORDER BY idx`, id)
	if err != nil {
		return nil, nil, err
	}
	for arms.Next() {
		var a Arm
		var knobs string
		if err := arms.Scan(&a.Index, &a.Name, &knobs); err != nil {
			arms.Close()
			return nil, nil, err
		}
		if err := json.Unmarshal([]byte(knobs), &a.Knobs); err != nil {
			arms.Close()
			return nil, nil, fmt.Errorf("results: arm %q knobs: %w", a.Name, err)
		}
		e.Arms = append(e.Arms, a)
	}
	arms.Close()
	trials, err := s.trials(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	return e, trials, nil
}

func (s *Store) trials(ctx context.Context, id string) ([]Trial, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT seq, block, arm, clients, started, finished, ops_per_sec, p50_ns, p95_ns, p99_ns,
		transactions, errors, fingerprint, excluded, output FROM trials WHERE experiment = ? ORDER BY seq`, id)
	if err != nil {
		return nil, err
	}
	var out []Trial
	for rows.Next() {
		var t Trial
		var started, finished int64
		var p50, p95, p99 sql.NullInt64
		var fp, output sql.NullString
		if err := rows.Scan(&t.Seq, &t.Block, &t.Arm, &t.Clients, &started, &finished, &t.OpsPerSec, &p50, &p95, &p99,
			&t.Transactions, &t.Errors, &fp, &t.Excluded, &output); err != nil {
			rows.Close()
			return nil, err
		}
		t.Started, t.Finished = time.Unix(0, started), time.Unix(0, finished)
		t.P50, t.P95, t.P99 = time.Duration(p50.Int64), time.Duration(p95.Int64), time.Duration(p99.Int64)
		t.Fingerprint, t.Output = raw(fp), output.String
		out = append(out, t)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	idx := make(map[int]int, len(out))
	for i, t := range out {
		idx[t.Seq] = i
	}
	secs, err := s.db.QueryContext(ctx, `SELECT seq, at, ops, errors FROM seconds WHERE experiment = ? ORDER BY seq, at`, id)
	if err != nil {
		return nil, err
	}
	defer secs.Close()
	for secs.Next() {
		var seq int
		var sec Second
		if err := secs.Scan(&seq, &sec.At, &sec.Ops, &sec.Errors); err != nil {
			return nil, err
		}
		if i, ok := idx[seq]; ok {
			out[i].Seconds = append(out[i].Seconds, sec)
		}
	}
	return out, secs.Err()
}

// Delete removes an experiment and everything it holds.
func (s *Store) Delete(ctx context.Context, ref string) error {
	id, err := s.Resolve(ctx, ref)
	if err != nil {
		return err
	}
	return s.exec1(ctx, `DELETE FROM experiments WHERE id = ?`, id)
}

// MarkInterrupted sets every still-running experiment to interrupted and
// returns their IDs (used by 'dbhost experiment recover').
func (s *Store) MarkInterrupted(ctx context.Context, note string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM experiments WHERE status = ?`, Running)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	for _, id := range ids {
		if err := s.Finish(ctx, id, Interrupted, nil, note); err != nil {
			return ids, err
		}
	}
	return ids, nil
}

func nullJSON(b json.RawMessage) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func raw(s sql.NullString) json.RawMessage {
	if !s.Valid || s.String == "" {
		return nil
	}
	return json.RawMessage(s.String)
}

// FindingVerdict is the verdict of the last finished experiment on a
// check's finding (dbhost experiment --finding), as audits show it.
type FindingVerdict struct {
	Experiment string `json:"experiment"`
	Verdict    string `json:"verdict"`
	// Ratio is fixed/now (throughput, or the latency metric judged), with
	// its 95 % interval; a null bound is open.
	Ratio    float64     `json:"ratio"`
	Interval [2]*float64 `json:"interval"`
	// Date is when the experiment started.
	Date time.Time `json:"date"`
}

// LastFindingVerdicts returns, by check ID, the verdict of the newest
// finished experiment on that check's finding on the host named hostname
// (any host when empty), in one query. Plans record the check IDs as
// "findings" (older plans have none and match nothing).
func (s *Store) LastFindingVerdicts(ctx context.Context, hostname string) (map[string]FindingVerdict, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT j.value, e.id, e.created, e.decision
		FROM experiments e, json_each(e.plan, '$.findings') j
		WHERE j.type = 'text' AND e.status = ? AND e.decision IS NOT NULL AND (? = '' OR json_extract(e.host, '$.hostname') = ?)
		ORDER BY e.created DESC, e.id DESC`, Done, hostname, hostname)
	if err != nil {
		return nil, fmt.Errorf("results: %w", err)
	}
	defer rows.Close()
	out := map[string]FindingVerdict{}
	for rows.Next() {
		var check, id, decision string
		var at int64
		if err := rows.Scan(&check, &id, &at, &decision); err != nil {
			return nil, fmt.Errorf("results: %w", err)
		}
		if _, ok := out[check]; ok {
			continue // a newer one came first
		}
		var d struct {
			Verdict  string      `json:"verdict"`
			Ratio    float64     `json:"ratio"`
			Interval [2]*float64 `json:"interval"`
		}
		if json.Unmarshal([]byte(decision), &d) != nil || d.Verdict == "" {
			continue
		}
		out[check] = FindingVerdict{Experiment: id, Verdict: d.Verdict, Ratio: d.Ratio, Interval: d.Interval, Date: time.Unix(0, at)}
	}
	return out, rows.Err()
}
