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
// are dropped as soon as they are judged, the settings' keys and values,
// which repeat from host to host, are stored once, and each snapshot's
// settings are packed as numbers (Snapshot.EachSetting). progress, when
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

// interner stores each distinct string once and numbers it, so that a
// snapshot can hold its settings as pairs of numbers. It is not safe for
// concurrent use.
type interner struct {
	ids  map[string]uint32
	strs []string
}

func newInterner() *interner { return &interner{ids: map[string]uint32{}} }

// id returns the number of s, adding s if it is new.
func (in *interner) id(s string) uint32 {
	if id, ok := in.ids[s]; ok {
		return id
	}
	id := uint32(len(in.strs))
	in.ids[s] = id
	in.strs = append(in.strs, s)
	return id
}

func (in *interner) str(s string) string { return in.strs[in.id(s)] }

// packed is a snapshot's settings as (key, value) numbers into the fleet's
// interner: 8 bytes a setting where a map of its own took about 60, and a
// host has a thousand or more settings.
type packed struct {
	in    *interner
	pairs []settingPair
}

type settingPair struct{ key, value uint32 }

// snapshot replaces the strings of s that repeat across hosts with shared
// copies, and packs its settings (s.Settings becomes nil).
func (in *interner) snapshot(s *Snapshot) {
	if s.Settings != nil {
		p := &packed{in: in, pairs: make([]settingPair, 0, len(s.Settings))}
		for k, v := range s.Settings {
			p.pairs = append(p.pairs, settingPair{in.id(k), in.id(v)})
		}
		s.Settings, s.packed = nil, p
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
