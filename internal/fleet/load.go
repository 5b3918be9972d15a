package fleet

import (
	"context"
	"runtime"
	"sync"
)

// LoadAll judges snapshot files in parallel, workers at a time (0: one per
// CPU the Go runtime uses, GOMAXPROCS). It returns the snapshots read, in
// the order of files, and the files that could not be read with the
// reason. Each worker keeps only the reduced Snapshot of a file: the facts
// are dropped as soon as they are judged, and the settings' keys and
// values, which repeat from host to host, are stored once. progress, when
// set, is called after each file (from the workers, one call at a time).
func LoadAll(ctx context.Context, files []string, workers int, progress func(done, total int)) ([]Snapshot, []LoadError) {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, max(len(files), 1))
	type result struct {
		snap Snapshot
		err  error
	}
	results := make([]result, len(files))
	next := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex // progress and the interner
	in := newInterner()
	done := 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				var res result
				if err := ctx.Err(); err != nil {
					res.err = err
				} else {
					res.snap, res.err = Load(ctx, files[i])
				}
				mu.Lock()
				in.snapshot(&res.snap)
				results[i] = res
				done++
				if progress != nil {
					progress(done, len(files))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range files {
		next <- i
	}
	close(next)
	wg.Wait()
	snaps := make([]Snapshot, 0, len(files))
	var errs []LoadError
	for i, r := range results {
		if r.err != nil {
			errs = append(errs, LoadError{File: files[i], Error: r.err.Error()})
			continue
		}
		snaps = append(snaps, r.snap)
	}
	return snaps, errs
}

// interner stores each distinct string once. It is not safe for
// concurrent use.
type interner map[string]string

func newInterner() interner { return interner{} }

func (in interner) str(s string) string {
	if v, ok := in[s]; ok {
		return v
	}
	in[s] = s
	return s
}

// snapshot replaces the strings of s that repeat across hosts with shared
// copies, and sizes its settings map to what it holds.
func (in interner) snapshot(s *Snapshot) {
	if s.Settings != nil {
		m := make(SettingMap, len(s.Settings))
		for k, v := range s.Settings {
			m[in.str(k)] = in.str(v)
		}
		s.Settings = m
	}
	for i := range s.Findings {
		f := &s.Findings[i]
		f.ID, f.Subject = in.str(f.ID), in.str(f.Subject)
	}
	if s.Raw != nil {
		m := make(map[string]string, len(s.Raw))
		for k, v := range s.Raw {
			m[in.str(k)] = in.str(v)
		}
		s.Raw = m
	}
	for i := range s.Instances {
		s.Instances[i] = in.str(s.Instances[i])
	}
	for i := range s.Databases {
		d := &s.Databases[i]
		d.Name, d.Engine, d.DataDir = in.str(d.Name), in.str(d.Engine), in.str(d.DataDir)
	}
	for i := range s.Stacks {
		st := &s.Stacks[i]
		st.Key = in.str(st.Key)
		for j := range st.Devices {
			st.Devices[j] = in.str(st.Devices[j])
		}
		for j := range st.Roles {
			st.Roles[j] = in.str(st.Roles[j])
		}
	}
	s.Findings = append([]Finding(nil), s.Findings...) // drop spare capacity
}
