package knob_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/knob"
	"github.com/dbhost/dbhost/internal/testdb"
)

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// loopDataDir makes an ext4 filesystem in a file, attaches it to a loop
// device, mounts it and returns a data directory on it and the device's
// name. Everything is undone when the test ends.
func loopDataDir(t *testing.T) (dataDir, dev string) {
	t.Helper()
	for _, tool := range []string{"losetup", "mkfs.ext4", "mount", "umount"} {
		_, err := exec.LookPath(tool)
		testdb.Need(t, tool, err == nil)
	}
	// The backing file lives on a disk, not in /tmp, which is tmpfs on
	// many hosts (Debian 13's default): the test follows it to that disk.
	dir, err := os.MkdirTemp("/var/tmp", "dbhost-knob-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	run(t, "mkfs.ext4", "-q", "-F", img)
	loop := run(t, "losetup", "--find", "--show", img)
	t.Cleanup(func() { exec.Command("losetup", "--detach", loop).Run() })
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	run(t, "mount", loop, mnt)
	t.Cleanup(func() { exec.Command("umount", mnt).Run() })
	dataDir = filepath.Join(mnt, "data")
	if err := os.Mkdir(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dataDir, filepath.Base(loop)
}

// Disk knobs go to every whole device under the data directory: the loop
// device and the disk holding its backing file.
func TestDiskKnobsLoop(t *testing.T) {
	j := hostChanger(t)
	dataDir, loop := loopDataDir(t)
	ctx := context.Background()
	a := knob.NewApplier(liveHost(t), j, knob.Target{DataDir: dataDir})
	fp, err := a.Fingerprint(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	devs := strings.Fields(fp["disk.devices"])
	if len(devs) < 2 || devs[0] != loop {
		t.Fatalf("devices under %s: %q, want %s and the disk below its backing file", dataDir, fp["disk.devices"], loop)
	}
	files := map[string]string{}
	for _, d := range devs {
		for _, attr := range []string{"scheduler", "read_ahead_kb"} {
			f := "/sys/block/" + d + "/queue/" + attr
			files[f] = read(t, f)
		}
	}
	// Current's per-device form applies back unchanged.
	cur, err := a.Current(ctx, []string{"disk.read_ahead_kb"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := a.Apply(ctx, []knob.Setting{{Name: "disk.read_ahead_kb", Value: cur["disk.read_ahead_kb"]}}, false); err != nil ||
		res.Values["disk.read_ahead_kb"] != cur["disk.read_ahead_kb"] {
		t.Errorf("Current %q applied back: %v, %v", cur["disk.read_ahead_kb"], res.Values, err)
	}
	for _, bad := range []string{"nosuch=128", loop + "=128"} {
		if err := a.Check(ctx, []knob.Setting{{Name: "disk.read_ahead_kb", Value: bad}}); err == nil {
			t.Errorf("Check(disk.read_ahead_kb=%s) passed", bad)
		}
	}
	loopSched := "/sys/block/" + loop + "/queue/scheduler"
	sched := "mq-deadline"
	if files[loopSched] == sched {
		sched = "none"
	}
	ra := "512"
	for f, v := range files {
		if strings.HasSuffix(f, "read_ahead_kb") && v == ra {
			ra = "1024"
		}
	}
	set := []knob.Setting{{Name: "disk.scheduler", Value: sched}, {Name: "disk.read_ahead_kb", Value: ra}}
	res, err := a.Apply(ctx, set, false)
	if err != nil {
		t.Fatal(err)
	}
	if res.Values["disk.scheduler"] != sched || res.Values["disk.read_ahead_kb"] != ra {
		t.Errorf("Applied %v", res.Values)
	}
	for _, d := range devs {
		if got := read(t, "/sys/block/"+d+"/queue/scheduler"); got != sched {
			t.Errorf("%s scheduler %s, want %s", d, got, sched)
		}
		if got := read(t, "/sys/block/"+d+"/queue/read_ahead_kb"); got != ra {
			t.Errorf("%s read_ahead_kb %s, want %s", d, got, ra)
		}
	}
	cur, err = a.Current(ctx, []string{"disk.scheduler", "disk.read_ahead_kb"})
	if err != nil || cur["disk.scheduler"] != sched || cur["disk.read_ahead_kb"] != ra {
		t.Errorf("Current = %v, %v", cur, err)
	}
	if err := j.Restore(); err != nil {
		t.Fatal(err)
	}
	for f, v := range files {
		if got := read(t, f); got != v {
			t.Errorf("after restore %s = %q, want %q", f, got, v)
		}
	}
}

// A data directory on a filesystem without a block device is refused
// clearly, before anything changes.
func TestDiskKnobsNoDevice(t *testing.T) {
	j := hostChanger(t)
	dir := t.TempDir()
	tmpfs := filepath.Join(dir, "tmpfs")
	lower, upper, work, merged := filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), filepath.Join(dir, "merged")
	for _, d := range []string{tmpfs, lower, upper, work, merged} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	run(t, "mount", "-t", "tmpfs", "-o", "size=1m", "dbhost-test", tmpfs)
	t.Cleanup(func() { exec.Command("umount", tmpfs).Run() })
	run(t, "mount", "-t", "overlay", "overlay", "-o", "lowerdir="+lower+",upperdir="+upper+",workdir="+work, merged)
	t.Cleanup(func() { exec.Command("umount", merged).Run() })
	for _, c := range []struct{ dir, fs string }{{tmpfs, "tmpfs"}, {merged, "overlay"}} {
		a := knob.NewApplier(liveHost(t), j, knob.Target{DataDir: c.dir})
		err := a.Check(context.Background(), []knob.Setting{{Name: "disk.read_ahead_kb", Value: "128"}})
		if err == nil || !strings.Contains(err.Error(), "is on "+c.fs+" mounted on "+c.dir+", which has no block device") {
			t.Errorf("%s: %v", c.fs, err)
		}
		fp, err := a.Fingerprint(context.Background(), nil)
		if err != nil || fp["disk.devices"] != "none" {
			t.Errorf("%s fingerprint: %v, %v", c.fs, fp["disk.devices"], err)
		}
	}
	if len(j.Journal().Changes()) != 0 {
		t.Errorf("journaled: %v", j.Journal().Changes())
	}
}
