package plan

import (
	"strconv"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/engine/mysql"
	"github.com/dbhost/dbhost/internal/engine/postgres"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/host"
)

// restarts models each server taken as restarted, in the order the facts
// list them: it gives back its huge pages, maps its memory again from the
// planned pool (or without it), and takes the unit settings dbhost's
// drop-in changes (or, started by hand, the limits of a login).
func (m *model) restarts() {
	for _, in := range m.g.Instances {
		if _, ok := m.restart[in]; !ok {
			continue
		}
		m.releaseHuge(in)
		if remap, ok := remapAtStart[in.Engine]; ok {
			remap(m, in)
		}
		if in.Unit != nil && !in.Unit.Masked {
			m.unitAtStart(in)
		} else {
			m.loginAtStart(in)
		}
	}
}

// remapAtStart maps a restarted server's memory again, for the engines whose
// shared memory or buffer pool the memory checks read from its mappings.
var remapAtStart = map[engine.Engine]func(*model, *facts.Instance){
	engine.Postgres: (*model).restartPostgres,
	engine.MySQL:    (*model).restartMySQL,
}

// releaseHuge returns the huge pages a stopped server held: the pages it
// faulted in become free, the rest of its mappings' reservations end.
func (m *model) releaseHuge(in *facts.Instance) {
	faulted := in.Mem.HugetlbBytes
	var kept []facts.Segment
	for _, s := range in.Mem.Shared {
		if s.Kind != facts.SegHugetlb {
			kept = append(kept, s)
			continue
		}
		p := m.pool(s.PageSizeKB)
		if p == nil || s.PageSizeKB <= 0 {
			continue
		}
		page := uint64(s.PageSizeKB) << 10
		pages := int64(ceilDiv(s.Size, page))
		used := min(int64(faulted/page), pages)
		faulted -= uint64(used) * page
		p.Free += used
		p.Reserved -= min(p.Reserved, pages-used)
	}
	in.Mem.Shared, in.Mem.HugetlbBytes = kept, 0
}

func ceilDiv(a, b uint64) uint64 {
	if b == 0 {
		return 0
	}
	return (a + b - 1) / b
}

// perBufferShmem is the shared memory PostgreSQL adds per shared buffer
// besides the 8 kB page (13-17: buffer descriptor 64, I/O condition
// variable 16, checkpoint sort item 20, buffer lookup hash entry up to 56,
// checkpointer request 24; rounded up so the pages are not under-counted).
const perBufferShmem = 184

// pgBlock is PostgreSQL's page size unless block_size says otherwise.
const pgBlock = 8192

// restartPostgres maps the postmaster's main shared memory again for the
// planned shared_buffers: its size is today's less today's buffers plus
// the planned ones (with their per-buffer bookkeeping), as the server would
// then report shared_memory_size and shared_memory_size_in_huge_pages. With
// huge_pages on or try it maps huge pages when the planned pool has them;
// with on and too few, the server does not start: the model keeps the
// mapping in ordinary pages so mem.hugepages.postgres sees the shortfall.
func (m *model) restartPostgres(in *facts.Instance) {
	size, ok := m.pgShmemSize(in)
	if !ok {
		m.note("%s restarted: its shared memory is not modelled (its size today is unknown)", in.Name())
		return
	}
	kb := pgPageKB(m.g, in)
	mode := pgHugeMode(in)
	huge := false
	var pages int64
	if kb > 0 {
		hp := uint64(kb) << 10
		pages = int64(ceilDiv(size, hp))
		setIfSet(in, "shared_memory_size_in_huge_pages", strconv.FormatUint(size/hp+1, 10))
		if p := m.pool(kb); p != nil && (mode == "on" || mode == "try") && p.Available() >= pages {
			p.Reserved += pages
			huge = true
		}
	}
	setIfSet(in, "shared_memory_size", strconv.FormatUint(ceilDiv(size, 1<<20), 10))
	if s, ok := in.Setting("shared_memory_size"); ok {
		s.Unit = "MB"
		in.Settings["shared_memory_size"] = s
	}
	seg := facts.Segment{Kind: facts.SegAnon, Path: "/dev/zero (deleted)", Size: ceilDiv(size, 4096) * 4096, PageSizeKB: 4}
	if huge {
		seg = facts.Segment{Kind: facts.SegHugetlb, Path: "/anon_hugepage (deleted)", Size: uint64(pages) * (uint64(kb) << 10), PageSizeKB: kb}
	}
	replaceMain(in, seg)
	if _, ok := in.Setting("huge_pages_status"); ok {
		setIfSet(in, "huge_pages_status", map[bool]string{true: "on", false: "off"}[huge])
	}
	if mode == "on" && !huge {
		avail := int64(0)
		if p := m.pool(kb); p != nil {
			avail = p.Available()
		}
		m.note("%s would not start after its restart: huge_pages = on needs %d huge pages of %d kB, the planned pool has %d available", in.Name(), pages, kb, avail)
	}
}

// pgShmemSize is the shared memory the postmaster maps at its next start.
func (m *model) pgShmemSize(in *facts.Instance) (uint64, bool) {
	obs := m.observed(in)
	if obs == nil {
		return 0, false
	}
	today, ok := pgShmemToday(obs)
	sbOld, ok1 := postgres.Bytes(obs.Instance, "shared_buffers")
	sbNew, ok2 := postgres.Bytes(in.Instance, "shared_buffers")
	if !ok || !ok1 || !ok2 || today < sbOld {
		return 0, false
	}
	block := uint64(pgBlock)
	if b, ok := postgres.Bytes(in.Instance, "block_size"); ok && b > 0 {
		block = b
	}
	size := today - sbOld + sbNew
	nOld, nNew := sbOld/block, sbNew/block
	// Areas PostgreSQL sizes from shared_buffers: the WAL buffers when
	// wal_buffers is automatic, and the commit log's buffers.
	grow := int64(walBuffers(in, sbNew)) - int64(walBuffers(obs, sbOld)) +
		int64(clogBuffers(nNew)*block) - int64(clogBuffers(nOld)*block)
	if nNew >= nOld {
		grow += int64((nNew - nOld) * perBufferShmem)
	} else {
		grow -= int64((nOld - nNew) * perBufferShmem)
	}
	if grow < 0 && uint64(-grow) > size-sbNew {
		return sbNew, true
	}
	return uint64(int64(size) + grow), true
}

// walBuffers is the WAL buffer size PostgreSQL picks for a shared_buffers
// when wal_buffers is automatic (-1): 1/32 of it, between 64 kB and one WAL
// segment (16 MB). A value a file or the command line sets stays as is
// (0 here: it does not change with shared_buffers).
func walBuffers(in *facts.Instance, sb uint64) uint64 {
	if st, ok := in.Settings["wal_buffers"]; ok && (strings.HasPrefix(st.Source, "file:") || st.Source == "cmdline") && strings.TrimSpace(st.Value) != "-1" {
		return 0
	}
	return min(max(sb/32, 64<<10), 16<<20)
}

// clogBuffers is the number of commit log buffers for n shared buffers
// (PostgreSQL 15: between 4 and 128, one per 512 buffers).
func clogBuffers(n uint64) uint64 { return min(128, max(4, n/512)) }

// pgShmemToday is the size of the postmaster's shared memory today:
// shared_memory_size where the server reports it, else its main mapping.
func pgShmemToday(in *facts.Instance) (uint64, bool) {
	if b, ok := postgres.Bytes(in.Instance, "shared_memory_size"); ok && b > 0 {
		return b, true
	}
	var best facts.Segment
	for _, s := range in.Mem.Shared {
		if (s.Kind == facts.SegAnon || s.Kind == facts.SegHugetlb || s.Kind == facts.SegSysV) && s.Size > best.Size {
			best = s
		}
	}
	return best.Size, best.Size > 0
}

// observed is the server as observed, before the plan.
func (m *model) observed(in *facts.Instance) *facts.Instance {
	for _, o := range m.obs.Instances {
		if o.Name() == in.Name() {
			return o
		}
	}
	return nil
}

// pgPageKB is the huge page size PostgreSQL asks for (huge_page_size, else
// the default size).
func pgPageKB(f *facts.Facts, in *facts.Instance) int {
	if b, ok := postgres.Bytes(in.Instance, "huge_page_size"); ok && b > 0 {
		return int(b >> 10)
	}
	return f.Memory.DefaultHugePageKB()
}

// pgHugeMode is huge_pages as on, off or try (PostgreSQL's default).
func pgHugeMode(in *facts.Instance) string {
	v := strings.ToLower(strings.Trim(strings.TrimSpace(in.SettingValue("huge_pages")), `'"`))
	switch v {
	case "", "try":
		return "try"
	case "on", "true", "yes", "1":
		return "on"
	}
	return "off"
}

// setIfSet changes a setting the server reports, keeping its source.
func setIfSet(in *facts.Instance, key, value string) {
	if s, ok := in.Setting(key); ok {
		s.Value = value
		in.Settings[engine.NormalizeName(key)] = s
	}
}

// replaceMain puts seg in place of the largest anonymous, System V or
// hugetlb mapping (the main shared memory), which releaseHuge may have
// removed already.
func replaceMain(in *facts.Instance, seg facts.Segment) {
	best := -1
	for i, s := range in.Mem.Shared {
		if (s.Kind == facts.SegAnon || s.Kind == facts.SegSysV) && (best < 0 || s.Size > in.Mem.Shared[best].Size) && s.Size >= 1<<20 {
			best = i
		}
	}
	if best >= 0 {
		seg.Start = in.Mem.Shared[best].Start
		in.Mem.Shared[best] = seg
		return
	}
	in.Mem.Shared = append([]facts.Segment{seg}, in.Mem.Shared...)
}

// restartMySQL maps InnoDB's buffer pool again: in huge pages when
// large_pages is on and the planned pool has them, else in ordinary memory
// (InnoDB falls back silently).
func (m *model) restartMySQL(in *facts.Instance) {
	on := false
	switch strings.ToUpper(in.SettingValue("large_pages")) {
	case "ON", "1", "TRUE", "YES":
		on = true
	}
	kb := m.g.Memory.DefaultHugePageKB()
	bp, ok := mysql.Bytes(in.Instance, "innodb_buffer_pool_size")
	if !on || !ok || kb <= 0 {
		return
	}
	page := uint64(kb) << 10
	pages := int64(ceilDiv(bp, page))
	p := m.pool(0)
	if p == nil || p.Available() < pages {
		m.note("%s restarted: large_pages is ON but the planned pool has too few pages for its buffer pool (%d needed): InnoDB falls back to ordinary memory", in.Name(), pages)
		return
	}
	p.Reserved += pages
	in.Mem.Shared = append([]facts.Segment{{Kind: facts.SegHugetlb, Path: "/anon_hugepage (deleted)", Size: uint64(pages) * page, PageSizeKB: kb, Private: true}}, in.Mem.Shared...)
}

// unitAtStart gives a server started by its unit what dbhost's drop-in
// sets: limits, oom_score_adj (PostgreSQL's backends reset themselves to
// PG_OOM_ADJUST_VALUE when the environment names it), the cgroup limits.
func (m *model) unitAtStart(in *facts.Instance) {
	u := in.Unit
	if u.How != "cgroup" {
		m.note("%s restarted by its unit %s, which it does not run under now: only the settings dbhost's drop-in changes are modelled, not the unit's others", in.Name(), u.Name)
	}
	for key, s := range u.Service {
		if !strings.HasSuffix(s.Source, "/"+dropinName) {
			continue
		}
		if item, ok := unitLimitItems[key]; ok {
			if soft, hard, ok := facts.ParseUnitLimit(s.Value); ok {
				setLimit(in, limitNames[item], soft, hard)
			}
			continue
		}
		switch key {
		case "OOMScoreAdjust":
			m.setOOM(in, s.Value)
		case "MemoryMax", "MemoryLimit":
			in.Cgroup.MemoryMax.Value, in.Cgroup.MemoryMax.Err = unitBytes(s.Value), ""
		case "TasksMax":
			m.setPidsMax(in)
		}
	}
}

// dropinName is the file name of dbhost's drop-ins.
const dropinName = "60-dbhost.conf"

// setOOM sets the postmaster's oom_score_adj and its children's: they
// inherit it, unless PostgreSQL's PG_OOM_ADJUST_VALUE (in the unit's
// Environment) makes them reset.
func (m *model) setOOM(in *facts.Instance, v string) {
	in.OOMScore.Value, in.OOMScore.Err = strings.TrimSpace(v), ""
	child := in.OOMScore.Value
	if in.Engine == engine.Postgres {
		if c, ok := pgOOMChild(in.Unit); ok {
			child = c
		}
	}
	for i := range in.ChildOOM {
		in.ChildOOM[i].Reading.Value, in.ChildOOM[i].Reading.Err = child, ""
	}
}

// pgOOMChild reads PG_OOM_ADJUST_VALUE from the drop-ins' Environment (the
// gathered unit does not keep the packaged unit's environment).
func pgOOMChild(u *facts.Unit) (string, bool) {
	s, ok := u.Service["Environment"]
	if !ok {
		return "", false
	}
	for _, w := range strings.Fields(s.Value) {
		if v, ok := strings.CutPrefix(strings.Trim(w, `"`), "PG_OOM_ADJUST_VALUE="); ok {
			return v, true
		}
	}
	return "", false
}

// unitBytes renders a MemoryMax= value as memory.max shows it.
func unitBytes(v string) string {
	if v == "infinity" {
		return "max"
	}
	if n, _, ok := facts.ParseUnitLimit(v); ok {
		return strconv.FormatUint(n, 10)
	}
	return v
}

// loginAtStart gives a server no unit starts the limits dbhost's limits.d
// lines set for its user: the model takes it as started again from a login
// session, where pam_limits applies them.
func (m *model) loginAtStart(in *facts.Instance) {
	changed := false
	for item, name := range limitNames {
		soft, hard := m.g.Persist.LimitFor(in.User, nil, item)
		if !ours(soft) && !ours(hard) {
			continue
		}
		l := in.Limits[name]
		s, h := l.Soft, l.Hard
		if ours(soft) {
			s = limitValue(soft.Value)
		}
		if ours(hard) {
			h = limitValue(hard.Value)
		}
		setLimit(in, name, s, h)
		changed = true
	}
	if changed {
		m.note("%s restarted without a systemd unit: modelled as started from a login session, which pam_limits gives dbhost's limits.d values", in.Name())
	}
}

func ours(e *facts.LimitEntry) bool { return e != nil && e.File == limitsFile }

func limitValue(v string) uint64 {
	if v == "unlimited" || v == "infinity" {
		return host.Unlimited
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0
	}
	return n
}
