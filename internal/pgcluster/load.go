package pgcluster

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/workload"
)

// BytesPerScale is the size of one pgbench scale unit once loaded
// (pgbench -i: 100 000 pgbench_accounts rows, their primary key, and the
// small tables, with pgbench's default fill factor): the slope of the
// pgbench tables' total size (pg_total_relation_size) between scales 10 and
// 100, measured with PostgreSQL 15 on x86-64 (BenchmarkLoad re-measures
// it). Scale 1 alone is 15.84 MB.
const BytesPerScale = 15_680_000

// ScaleFor returns the pgbench scale whose data set is about fraction of
// shared_buffers (at least 1). Keep fraction below 1 for a data set that
// stays in shared_buffers: pgbench's history table and dead row versions
// grow during a run.
func (c *Cluster) ScaleFor(fraction float64) int {
	if !(fraction > 0) {
		return 1
	}
	return max(1, int(math.Round(fraction*float64(c.SharedBuffers)/BytesPerScale)))
}

// Load fills BenchDB with pgbench's tables at the given scale (pgbench -i
// -q -s scale, with this cluster's own pgbench) and ends with a checkpoint,
// so that trials do not inherit the load's dirty buffers.
func (c *Cluster) Load(ctx context.Context, scale int) error {
	if scale < 1 {
		return fmt.Errorf("pgcluster: scale %d (at least 1)", scale)
	}
	spec := workload.Spec{Kind: workload.PGBench, Scale: scale, Bin: filepath.Join(c.Bin, "pgbench"),
		Duration: time.Second, // not used by Prepare, but validated
		WorkDir:  c.WorkDir}
	h, err := host.Open("/")
	if err != nil {
		return err
	}
	t, err := engine.Locate(ctx, h, c.Target())
	if err != nil {
		return fmt.Errorf("pgcluster: load: %w", err)
	}
	if err := workload.Prepare(ctx, t, spec); err != nil {
		return fmt.Errorf("pgcluster: load: %w", err)
	}
	return c.Checkpoint(ctx)
}

// Checkpoint forces a checkpoint, so that the next trial starts without
// dirty buffers left by what came before.
func (c *Cluster) Checkpoint(ctx context.Context) error {
	conn, err := c.connect(ctx, BenchDB)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CHECKPOINT"); err != nil {
		return fmt.Errorf("pgcluster: checkpoint: %w", err)
	}
	return nil
}

// Prewarm reads every table and index of BenchDB into shared_buffers, so
// that trials start warm (after Load, and after each Restart). It uses the
// pg_prewarm extension (part of PostgreSQL's contrib modules) when the
// server has it; otherwise it reads each table sequentially, which warms
// the OS page cache but fills shared_buffers only partly (PostgreSQL reads
// large tables through a small ring buffer).
func (c *Cluster) Prewarm(ctx context.Context) error {
	conn, err := c.connect(ctx, BenchDB)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var have bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_prewarm')`).Scan(&have); err != nil {
		return fmt.Errorf("pgcluster: prewarm: %w", err)
	}
	const rels = `FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i', 'm')`
	if have {
		if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_prewarm"); err != nil {
			return fmt.Errorf("pgcluster: prewarm: %w", err)
		}
		if _, err := conn.Exec(ctx, "SELECT pg_prewarm(c.oid::regclass) "+rels); err != nil {
			return fmt.Errorf("pgcluster: prewarm: %w", err)
		}
		return nil
	}
	rows, err := conn.Query(ctx, "SELECT quote_ident(c.relname) "+rels+" AND c.relkind = 'r'")
	if err != nil {
		return fmt.Errorf("pgcluster: prewarm: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgcluster: prewarm: %w", err)
	}
	for _, t := range tables {
		if _, err := conn.Exec(ctx, "SELECT count(*) FROM public."+t); err != nil {
			return fmt.Errorf("pgcluster: prewarm %s: %w", t, err)
		}
	}
	return nil
}

// connect opens a session as the postgres superuser over the private
// socket. Nothing is taken from the environment (PGHOST, PGOPTIONS, ...):
// the cluster is fully described by c.
func (c *Cluster) connect(ctx context.Context, db string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("sslmode=disable connect_timeout=10")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.Password = c.SocketDir, uint16(c.Port), OSUser, db, ""
	cfg.Fallbacks = nil
	cfg.TLSConfig = nil
	cfg.RuntimeParams = map[string]string{"application_name": "dbhost"}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgcluster: connect to %s: %w", c.SocketDir, err)
	}
	return conn, nil
}
