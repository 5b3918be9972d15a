package mem

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/dbhost/dbhost/internal/engine/all"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/testdb"
)

func needRoot(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs processes, reads every process")
	}
	testdb.Need(t, "root (map_files and other users' smaps)", os.Geteuid() == 0)
}

func liveScan(t *testing.T, opt Options) *Report {
	t.Helper()
	h, err := host.Open("/")
	if err != nil {
		t.Fatal(err)
	}
	r, err := Scan(context.Background(), h, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func near(got, want, slack uint64) bool {
	return got+slack >= want && got <= want+slack
}

// The seed's experiment, scaled down: a parent maps 64 MiB and never
// touches it, child 1 writes a quarter, child 2 a half. The region must
// appear once, hold 32 MiB, and the PSS shares must add up to it; once the
// children exit, the 32 MiB stay charged to the region.
func TestSharedRegionsLive(t *testing.T) {
	needRoot(t)
	for _, tc := range []struct{ mode, variant string }{
		{"anon", "stay"}, {"anon", "exit"},
		{"sysv", "stay"}, {"sysv", "exit"}, {"sysv", "orphan"},
		{"posix", "stay"}, {"posix", "exit"}, {"posix", "orphan"},
	} {
		t.Run(tc.mode+"-"+tc.variant, func(t *testing.T) {
			d := startDemo(t, tc.mode, tc.variant)
			r := liveScan(t, Options{})
			checkDemo(t, d, r)
			checkAgainstSmaps(t, d.findRegion(t, r))
		})
	}
}

// checkDemo asserts what the scenario must show, live or from a fixture.
func checkDemo(t *testing.T, d *demo, r *Report) {
	t.Helper()
	rg := d.findRegion(t, r)
	const want = demoSize / 2
	if rg.Size != demoSize {
		t.Errorf("apparent size %d, want %d", rg.Size, demoSize)
	}
	if !rg.ResidentKnown || !near(rg.Resident, want, 2*pageSize) {
		t.Errorf("resident %d (known %v, %s), want %d", rg.Resident, rg.ResidentKnown, rg.ResidentSource, want)
	}
	var wantPIDs []int
	switch d.variant {
	case "stay":
		wantPIDs = d.pids()
	case "exit":
		wantPIDs = []int{d.procs[0]}
	}
	if !slices.Equal(rg.PIDs, wantPIDs) && !(len(rg.PIDs) == 0 && len(wantPIDs) == 0) {
		t.Errorf("mapped by %v, want %v", rg.PIDs, wantPIDs)
	}
	if rg.Orphaned != (d.variant == "orphan") {
		t.Errorf("orphaned %v in variant %s", rg.Orphaned, d.variant)
	}
	var sum uint64
	share := map[int]uint64{}
	for _, m := range rg.Mappers {
		sum += m.PSS
		share[m.PID] = m.PSS
	}
	if sum != rg.Mapped {
		t.Errorf("mapped %d, sum of shares %d", rg.Mapped, sum)
	}
	switch d.variant {
	case "stay":
		// Pages 0-16 MiB are mapped by both children, 16-32 MiB by the
		// second only; the parent never touched any.
		if !near(sum, rg.Resident, 4*pageSize) {
			t.Errorf("PSS shares add up to %d, resident %d", sum, rg.Resident)
		}
		if share[d.procs[0]] != 0 || !near(share[d.procs[1]], 8<<20, 4*pageSize) || !near(share[d.procs[2]], 24<<20, 4*pageSize) {
			t.Errorf("PSS shares %v, want parent 0, child 1 8 MiB, child 2 24 MiB", share)
		}
	default:
		if sum != 0 {
			t.Errorf("PSS shares %v with the children gone, want 0", share)
		}
	}
	// The processes' rows agree with the region.
	for _, p := range r.Processes {
		if slices.Contains(wantPIDs, p.PID) && p.RegionPSS != share[p.PID] {
			t.Errorf("pid %d: region PSS %d, region's mapper share %d", p.PID, p.RegionPSS, share[p.PID])
		}
	}
	// Counted once: the host view's regions total includes it once.
	var total uint64
	for _, x := range r.Regions {
		total += x.Resident
	}
	if total != r.Host.RegionsResident {
		t.Errorf("regions resident %d, host view %d", total, r.Host.RegionsResident)
	}
}

// A private PostgreSQL with 64 MB of shared_buffers, loaded by pgbench: its
// main shared region is found, charged to its instance, and the instance's
// total adds up.
func TestPostgresInstanceLive(t *testing.T) {
	needRoot(t)
	// autovacuum off: no worker may come and map the region between the
	// scan and the smaps read that checks it.
	s := testdb.Postgres(t, testdb.Options{Settings: map[string]string{"shared_buffers": "64MB", "autovacuum": "off"}})
	bin, _ := testdb.PostgresBin()
	pgbench := filepath.Join(bin, "pgbench")
	if _, err := os.Stat(pgbench); err != nil {
		pgbench = "pgbench"
	}
	cmd := exec.Command(pgbench, "-i", "-s", "5", "-q", "-h", s.Socket, "-p", strconv.Itoa(s.Port), "-U", "postgres", "postgres")
	uid, gid := lookupIDs(t, "postgres")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pgbench -i: %v\n%s", err, out)
	}
	// pgbench -i writes through a small ring of buffers; reading the table
	// into shared_buffers touches the region for real.
	cmd = exec.Command(filepath.Join(bin, "psql"), "-X", "-q", "-h", s.Socket, "-p", strconv.Itoa(s.Port), "-U", "postgres", "-d", "postgres",
		"-c", "CREATE EXTENSION IF NOT EXISTS pg_prewarm", "-c", "SELECT pg_prewarm('pgbench_accounts', 'buffer')")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	cmd.Dir = "/"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pg_prewarm: %v\n%s", err, out)
	}
	r := liveScan(t, Options{Engine: "postgres"})
	var in *Instance
	for i := range r.Instances {
		if r.Instances[i].PID == s.PID {
			in = &r.Instances[i]
		}
	}
	if in == nil {
		t.Fatalf("instance of pid %d not found: %+v", s.PID, r.Instances)
	}
	if want := fmt.Sprintf("postgres :%d", s.Port); in.Name != want {
		t.Errorf("instance name %q, want %q", in.Name, want)
	}
	var main *Region
	kinds := map[string]int{}
	var resident uint64
	for i := range r.Regions {
		rg := &r.Regions[i]
		if rg.Instance != in.Name {
			continue
		}
		kinds[rg.Kind]++
		resident += rg.Resident
		if main == nil || rg.Size > main.Size {
			main = rg
		}
	}
	if main == nil {
		t.Fatalf("no region charged to %s; regions: %+v", in.Name, r.Regions)
	}
	t.Logf("%s: regions %v; main %s %s size %d resident %d mapped %d by %d processes; total %d",
		in.Name, kinds, main.Kind, main.Name, main.Size, main.Resident, main.Mapped, len(main.PIDs), in.Total)
	if !slices.Contains(main.PIDs, s.PID) {
		t.Errorf("main region not mapped by the postmaster: %v", main.PIDs)
	}
	if main.Size < 64<<20 || main.Size > 256<<20 {
		t.Errorf("main region %d bytes, want shared_buffers (64 MiB) plus PostgreSQL's other shared state", main.Size)
	}
	if !main.ResidentKnown || main.Resident < 48<<20 {
		t.Errorf("main region resident %d (known %v) after pgbench -i -s 5, want most of the 64 MiB of buffers", main.Resident, main.ResidentKnown)
	}
	if main.Mapped > main.Resident+8*pageSize {
		t.Errorf("mapped %d exceeds resident %d", main.Mapped, main.Resident)
	}
	// The background processes still move right after the load (the
	// checkpointer, the background writer): compare once they hold still.
	var diffs []string
	for try := 0; try < 20; try++ {
		if diffs = againstSmaps(main); len(diffs) == 0 {
			break
		}
		time.Sleep(250 * time.Millisecond)
		r2 := liveScan(t, Options{Engine: "postgres"})
		for i := range r2.Regions {
			if r2.Regions[i].Name == main.Name && r2.Regions[i].Inode == main.Inode {
				main = &r2.Regions[i]
			}
		}
	}
	for _, d := range diffs {
		t.Error(d)
	}
	if kinds[KindSysV] == 0 {
		t.Errorf("the postmaster's small System V segment was not found: %v", kinds)
	}
	if in.RegionsResident != resident {
		t.Errorf("instance regions resident %d, its regions add up to %d", in.RegionsResident, resident)
	}
	var own, pss uint64
	for _, p := range r.Processes {
		if slices.Contains(in.PIDs, p.PID) {
			if p.Instance != in.Name {
				t.Errorf("pid %d: instance %q, want %q", p.PID, p.Instance, in.Name)
			}
			own += p.Own
			pss += p.PSS
		}
	}
	if in.Own != own || in.Total != in.RegionsResident+own {
		t.Errorf("instance own %d total %d; processes own %d, regions %d", in.Own, in.Total, own, in.RegionsResident)
	}
	if in.Total > in.RegionsResident+pss || in.Total < main.Resident {
		t.Errorf("total %d not within [main region %d, regions + PSS %d]", in.Total, main.Resident, in.RegionsResident+pss)
	}
	if len(in.PIDs) < 5 {
		t.Errorf("instance processes %v: want the postmaster and its background processes", in.PIDs)
	}
}

func lookupIDs(t *testing.T, name string) (uint32, uint32) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return uint32(uid), uint32(gid)
}

// checkAgainstSmaps compares each mapper's share of a region, computed from
// the pages every mapper has present, with the kernel's own per-mapping
// PSS in smaps (read now: idle processes, so the same pages).
func checkAgainstSmaps(t *testing.T, rg Region) {
	t.Helper()
	for _, d := range againstSmaps(&rg) {
		t.Error(d)
	}
}

func againstSmaps(rg *Region) []string {
	var diffs []string
	for _, mp := range rg.Mappers {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", mp.PID))
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("pid %d: %v", mp.PID, err))
			continue
		}
		_, maps := ParseSmaps(b, func(h *Header) bool {
			return h.Inode == rg.Inode && fmt.Sprintf("%d:%d", h.Major, h.Minor) == rg.Dev && h.Shared()
		})
		var pss, rss uint64
		for _, m := range maps {
			pss += m.Pss
			rss += m.Rss
		}
		// smaps rounds each mapping's PSS down to a KiB.
		if !near(mp.PSS, pss, uint64(len(maps))<<10) || mp.RSS != rss {
			diffs = append(diffs, fmt.Sprintf("pid %d %s: share pss %d rss %d, smaps says pss %d rss %d", mp.PID, rg.Name, mp.PSS, mp.RSS, pss, rss))
		}
	}
	return diffs
}

// PROCMAP_QUERY and PAGEMAP_SCAN see what maps and smaps show: the demo's
// parent and children through the ioctls and through the files agree.
func TestIoctlsMatchFiles(t *testing.T) {
	needRoot(t)
	d := startDemo(t, "posix", "stay")
	h, _ := host.Open("/")
	for _, pid := range d.pids() {
		vmas, err := h.SharedFileMappings(pid)
		if errors.Is(err, syscall.ENOTTY) || errors.Is(err, syscall.EINVAL) {
			t.Skip("kernel without PROCMAP_QUERY (Linux 6.11+)")
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		ParseMaps(b, func(hd *Header) {
			if hd.Shared() && len(hd.Path) > 0 && hd.Path[0] == '/' {
				want = append(want, fmt.Sprintf("%x-%x %s %x %d:%d %d %s", hd.Start, hd.End, hd.Perms, hd.Offset, hd.Major, hd.Minor, hd.Inode, hd.Path))
			}
		})
		if len(want) == 0 {
			t.Fatalf("pid %d maps no shared file: the demo's region is missing", pid)
		}
		var got []string
		for _, v := range vmas {
			got = append(got, fmt.Sprintf("%x-%x %s %x %d:%d %d %s", v.Start, v.End, v.Perms, v.Offset, v.Major, v.Minor, v.Inode, v.Name))
		}
		if !slices.Equal(got, want) {
			t.Errorf("pid %d: PROCMAP_QUERY\n%s\nmaps\n%s", pid, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
