package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/dbhost/dbhost/internal/contention"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/mem"
	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/waiver"
)

func (a *app) collectCmd() *cobra.Command {
	c := newCmd("collect -o FILE.tar.gz", "write a snapshot of what the checks read, without secrets")
	c.Example = `  sudo dbhost collect -o db1.tar.gz
  dbhost audit --from db1.tar.gz`
	setExits(c, map[int]string{ExitOK: "The snapshot is written.", ExitError: "No snapshot: it could not run, or the file could not be written."})
	fs := c.Flags()
	var src sourceFlags
	src.register(fs, false)
	out := fs.StringP("output", "o", "", "write the snapshot to this file ('-' for standard output)")
	note := fs.String("note", "", "free text stored in the manifest (what this snapshot shows)")
	c.Run = a.do(func(ctx context.Context, _ []string) int {
		env := a.env
		if *out == "" {
			fmt.Fprintln(env.Stderr, "dbhost collect: -o FILE is required")
			return ExitError
		}
		h, err := host.Open(src.root)
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost collect:", err)
			return ExitError
		}
		defer h.Close()
		if err := h.StartRecording(); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost collect:", err)
			return ExitError
		}
		f := facts.Gather(ctx, h, src.options())
		for _, why := range recordObservers(ctx, h) {
			fmt.Fprintln(env.Stderr, "dbhost collect:", why)
		}
		// The waiver file is recorded as audit reads it (the checks on its
		// path too), so that audit --from shows the host's waivers.
		if _, err := waiver.ReadHost(h, waiver.DefaultPath); err != nil {
			fmt.Fprintln(env.Stderr, "dbhost collect: audit --from will refuse the waiver file (--no-waivers ignores it):", termsafe.Line(err.Error()))
		}
		write := func(w io.Writer) error {
			return h.WriteSnapshot(w, host.SnapshotInfo{Note: *note, ToolVersion: env.Version})
		}
		if *out == "-" {
			err = write(termsafe.Raw(env.Stdout))
		} else {
			err = writeFileAtomic(*out, 0o600, write)
		}
		if err != nil {
			fmt.Fprintln(env.Stderr, "dbhost collect:", err)
			return ExitError
		}
		if *out != "-" {
			fmt.Fprintf(env.Stderr, "dbhost collect: wrote %s (%d instances, %d notes)\n", *out, len(f.Instances), len(f.Notes))
		}
		return ExitOK
	})
	return c
}

// recordObservers reads the host once the way 'dbhost mem' and 'dbhost
// contention' do, so that the snapshot holds what they read with --from
// (smaps_rollup or smaps of every process, System V and /dev/shm segments,
// NUMA nodes, /proc/stat, the instances' threads). Nothing is connected to:
// query counts need the live host. The instances are found without a
// second inspection: the gather before this one already read their
// configuration. It returns what could not be read.
func recordObservers(ctx context.Context, h *host.Host) []string {
	var notes []string
	if _, err := mem.Scan(ctx, h, mem.Options{}); err != nil {
		notes = append(notes, "memory accounting not recorded: "+err.Error())
	}
	s, err := contention.NewSampler(ctx, h, contention.Options{Engine: engine.Options{NoConnect: true, NoInspect: true}})
	if err != nil {
		return append(notes, "contention sample not recorded: "+err.Error())
	}
	s.Sample(ctx)
	s.Close()
	return notes
}
