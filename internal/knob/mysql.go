package knob

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	enginemysql "github.com/dbhost/dbhost/internal/engine/mysql"
)

// OptionFileName is the file dbhost writes into the server's last
// !includedir directory: read last, so that it wins over the packaged
// files of the same directory.
const OptionFileName = "zz-dbhost-experiment.cnf"

const myTimeout = 10 * time.Second

// myVar is one MySQL/MariaDB variable as the server describes it.
type myVar struct {
	name     string
	vtype    string // MariaDB's VARIABLE_TYPE; "" when the server does not say (MySQL)
	readOnly bool
	origin   string // MariaDB's GLOBAL_VALUE_ORIGIN: COMPILE-TIME, CONFIG, COMMAND-LINE, SQL, AUTO
	min, max string
	block    string
	enum     []string
	want     string // normalised value asked for
	arg      any    // the value as SET GLOBAL takes it
}

// myServer is where a MySQL connection goes and what it found there.
type myServer struct {
	net, addr, user string
	dataDir         string
	pidFile         string
}

// myConnect opens the target's located server and reads where its data
// lives.
func (a *Applier) myConnect(ctx context.Context) (*sql.DB, myServer, error) {
	t, err := a.endpoint(ctx, engine.MySQL)
	if err != nil {
		return nil, myServer{}, err
	}
	cfg, err := enginemysql.EndpointConfig(t, "", myTimeout)
	if err != nil {
		return nil, myServer{}, err
	}
	db, err := enginemysql.OpenEndpoint(t, "", myTimeout)
	if err != nil {
		return nil, myServer{}, err
	}
	s := myServer{net: cfg.Net, addr: cfg.Addr, user: cfg.User}
	if err := db.QueryRowContext(ctx, "SELECT @@datadir, @@pid_file").Scan(&s.dataDir, &s.pidFile); err != nil {
		db.Close()
		return nil, s, fmt.Errorf("connect to %s: %w", t, err)
	}
	s.dataDir = filepath.Clean(s.dataDir)
	if s.pidFile != "" && !filepath.IsAbs(s.pidFile) {
		s.pidFile = filepath.Join(s.dataDir, s.pidFile)
	}
	if a.t.DataDir != "" && !samePath(a.t.DataDir, s.dataDir) {
		db.Close()
		return nil, s, fmt.Errorf("the connection reaches the server of %s, not of %s", s.dataDir, a.t.DataDir)
	}
	return db, s, nil
}

// planMySQL looks every variable up and checks its value; restart says one
// of them is not dynamic.
func (a *Applier) planMySQL(ctx context.Context, items []*item) (restart bool, err error) {
	db, srv, err := a.myConnect(ctx)
	if err != nil {
		return false, fmt.Errorf("%s: %w", items[0].Name, err)
	}
	defer db.Close()
	if err := a.checkRecoveryLogin(ctx, engine.MySQL); err != nil {
		return false, err
	}
	var errs []error
	var static []*item
	for _, it := range items {
		v, err := lookupMySQL(ctx, db, strings.TrimPrefix(it.Name, "mysql."))
		if err == nil {
			err = v.check(it.Value)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", it.Name, err))
			continue
		}
		var old sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL."+myIdent(v.name)).Scan(&old); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", it.Name, err))
			continue
		}
		if !old.Valid {
			errs = append(errs, fmt.Errorf("%s: its present value is NULL, which SET GLOBAL cannot put back", it.Name))
			continue
		}
		it.mysql = v
		if v.readOnly {
			static = append(static, it)
		}
	}
	if len(static) > 0 {
		restart = true
		if _, err := a.myOptionFile(ctx, srv, static); err != nil {
			errs = append(errs, err)
		}
	}
	return restart, errors.Join(errs...)
}

// myIdent quotes a variable name for @@GLOBAL. and SET GLOBAL.
func myIdent(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

func lookupMySQL(ctx context.Context, db *sql.DB, name string) (*myVar, error) {
	v := &myVar{name: name}
	var scope, ro, enum, min, max, block sql.NullString
	err := db.QueryRowContext(ctx, `SELECT VARIABLE_TYPE, READ_ONLY, VARIABLE_SCOPE, GLOBAL_VALUE_ORIGIN,
		NUMERIC_MIN_VALUE, NUMERIC_MAX_VALUE, NUMERIC_BLOCK_SIZE, ENUM_VALUE_LIST
		FROM information_schema.SYSTEM_VARIABLES WHERE VARIABLE_NAME = ?`, strings.ToUpper(name)).
		Scan(&v.vtype, &ro, &scope, &v.origin, &min, &max, &block, &enum)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, errors.New("no such variable on this server")
	case err != nil:
		// MySQL has no SYSTEM_VARIABLES table: whether the variable is
		// dynamic shows when SET GLOBAL refuses it.
		var n, val string
		like := strings.NewReplacer(`\`, `\\`, `_`, `\_`, `%`, `\%`).Replace(name)
		if err := db.QueryRowContext(ctx, "SHOW GLOBAL VARIABLES LIKE ?", like).Scan(&n, &val); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return nil, errors.New("no such variable on this server")
			}
			return nil, err
		}
		return v, nil
	}
	if scope.String == "SESSION ONLY" {
		return nil, errors.New("a session-only variable: it has no global value to set")
	}
	v.readOnly = ro.String == "YES"
	v.min, v.max, v.block = min.String, max.String, block.String
	if enum.String != "" {
		v.enum = strings.Split(enum.String, ",")
	}
	return v, nil
}

func (v *myVar) numeric() bool {
	t := v.vtype
	return strings.HasPrefix(t, "INT") || strings.HasPrefix(t, "BIGINT") || strings.HasPrefix(t, "DOUBLE")
}

// check validates a value and works out how SET GLOBAL takes it: numbers
// as numbers (size suffixes K, M, G, T resolved: SET GLOBAL does not read
// them), booleans as ON/OFF, enum values as the server lists them.
func (v *myVar) check(value string) error {
	value = strings.TrimSpace(value)
	switch {
	case v.vtype == "BOOLEAN":
		on, ok := enginemysql.IsOn(value)
		if !ok {
			return fmt.Errorf("%q is not a boolean (ON, OFF)", value)
		}
		v.want, v.arg = "OFF", "OFF"
		if on {
			v.want, v.arg = "ON", "ON"
		}
	case v.vtype == "ENUM":
		for _, e := range v.enum {
			if strings.EqualFold(e, value) {
				v.want, v.arg = e, e
				return nil
			}
		}
		return fmt.Errorf("%q is not one of %s", value, strings.Join(v.enum, ", "))
	case strings.HasPrefix(v.vtype, "DOUBLE"):
		f, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", value)
		}
		if err := v.bounds(f, value); err != nil {
			return err
		}
		v.want, v.arg = strconv.FormatFloat(f, 'f', -1, 64), f
	case v.numeric():
		n, err := myInt(value)
		if err != nil {
			return err
		}
		if err := v.bounds(n, value); err != nil {
			return err
		}
		if b, err := strconv.ParseFloat(v.block, 64); err == nil && b > 1 && math.Mod(n, b) != 0 {
			return fmt.Errorf("%q is not a multiple of %s (the server would round it)", value, v.block)
		}
		v.want, v.arg = strconv.FormatFloat(n, 'f', -1, 64), int64OrUint(n)
	case v.vtype == "":
		// Type unknown (MySQL): numbers as numbers, the rest as text.
		if n, err := myInt(value); err == nil {
			v.want, v.arg = strconv.FormatFloat(n, 'f', -1, 64), int64OrUint(n)
		} else {
			v.want, v.arg = value, value
		}
	default:
		v.want, v.arg = value, value
	}
	return nil
}

// myInt reads an integer with an optional K, M, G, T suffix.
func myInt(value string) (float64, error) {
	if n, err := strconv.ParseInt(value, 10, 64); err == nil {
		return float64(n), nil
	}
	if n, ok := enginemysql.ParseSize(value); ok {
		return float64(n), nil
	}
	return 0, fmt.Errorf("%q is not a number (a size may end in K, M, G, T)", value)
}

func int64OrUint(n float64) any {
	if n > math.MaxInt64 {
		return uint64(n)
	}
	return int64(n)
}

func (v *myVar) bounds(n float64, value string) error {
	if lo, err := strconv.ParseFloat(v.min, 64); err == nil && n < lo {
		return fmt.Errorf("%q is below the minimum %s", value, v.min)
	}
	if hi, err := strconv.ParseFloat(v.max, 64); err == nil && n > hi {
		return fmt.Errorf("%q is above the maximum %s", value, v.max)
	}
	return nil
}

// same compares a wanted value with one read back.
func (v *myVar) same(got string) bool {
	want := v.want
	if on, ok := enginemysql.IsOn(want); ok && (v.vtype == "BOOLEAN" || v.vtype == "") {
		g, ok := enginemysql.IsOn(got)
		return ok && g == on
	}
	w, err1 := strconv.ParseFloat(want, 64)
	g, err2 := strconv.ParseFloat(got, 64)
	if err1 == nil && err2 == nil {
		return w == g || math.Abs(w-g) <= 1e-9*math.Max(math.Abs(w), math.Abs(g))
	}
	if v.vtype == "FLAGSET" {
		// optimizer_switch='index_merge=off' reads back as the whole set.
		have := map[string]bool{}
		for _, f := range strings.Split(strings.ToLower(got), ",") {
			have[strings.TrimSpace(f)] = true
		}
		for _, f := range strings.Split(strings.ToLower(want), ",") {
			if f = strings.TrimSpace(f); f != "" && f != "default" && !have[f] {
				return false
			}
		}
		return true
	}
	return strings.EqualFold(strings.TrimSpace(want), strings.TrimSpace(got))
}

// mySetWait bounds the wait for a SET GLOBAL to show: the statement is
// synchronous, so a value that does not show at once was clamped or
// refused, which the read-back reports with the server's warnings.
const mySetWait = 2 * time.Second

// applyMySQLGlobal sets each dynamic variable through the change layer
// (kind db-setting: SET GLOBAL on the engine profile's connection to the
// located server).
func (a *Applier) applyMySQLGlobal(ctx context.Context, items []*item) error {
	conn, ref, err := a.settings(ctx, engine.MySQL)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, it := range items {
		v := it.mysql
		if v.readOnly {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, mySetWait)
		_, err := a.c.Setting(sctx, conn, ref, v.name, v.want, false)
		late := sctx.Err() != nil
		cancel()
		if w, ok := conn.(interface{ Warnings() string }); ok {
			it.mysqlWarn = w.Warnings()
		}
		if err != nil && !late {
			return fmt.Errorf("%s: the server refused %q: %w", it.Name, it.Value, err)
		}
	}
	return nil
}

// readBackMySQL reads every variable on a new connection.
func (a *Applier) readBackMySQL(ctx context.Context, items []*item) (map[string]string, error) {
	db, _, err := a.myConnect(ctx)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	out := map[string]string{}
	var errs []error
	for _, it := range items {
		var got sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL."+myIdent(it.mysql.name)).Scan(&got); err != nil {
			errs = append(errs, fmt.Errorf("%s: reading back: %w", it.Name, err))
			continue
		}
		if !it.mysql.same(got.String) {
			msg := fmt.Sprintf("%s: wanted %s, the server has %s", it.Name, it.Value, got.String)
			if it.mysqlWarn != "" {
				msg += " (" + it.mysqlWarn + ")"
			}
			if it.mysql.readOnly {
				msg += " after a restart with " + OptionFileName
			}
			errs = append(errs, errors.New(msg))
			continue
		}
		out[it.Name] = got.String
	}
	return out, errors.Join(errs...)
}

// currentMySQL reads global values.
func (a *Applier) currentMySQL(ctx context.Context, names []string) (map[string]string, error) {
	db, _, err := a.myConnect(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", names[0], err)
	}
	defer db.Close()
	out := map[string]string{}
	var errs []error
	for _, n := range names {
		var v sql.NullString
		if err := db.QueryRowContext(ctx, "SELECT @@GLOBAL."+myIdent(strings.TrimPrefix(n, "mysql."))).Scan(&v); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", n, err))
			continue
		}
		out[n] = v.String
	}
	return out, errors.Join(errs...)
}
