package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/dbhost/dbhost/internal/testdb"
)

// Settings that another setting makes moot, recorded on both sides.
func init() {
	register(Scenario{
		Name:  "net-syncookies-off",
		Note:  "net.ipv4.tcp_syncookies 0 with the default tcp_max_syn_backlog: without SYN cookies a full SYN queue drops connection attempts, so the backlog size matters (with cookies on, as on every other recording, it is moot)",
		Setup: sysctlSetup("net.ipv4.tcp_syncookies", "0"),
	})
}

func init() {
	register(Scenario{
		Name: "storage-nobarrier-writethrough",
		Note: "private PostgreSQL on ext4 (loop device) mounted noatime,barrier=0, the loop device's queue/write_cache set to \"write through\": the kernel sends no flushes either way, so barrier=0 is moot",
		Setup: func(r *Run) error {
			dir, err := loopFS(r, "pg", "ext4", "noatime,barrier=0", false)
			if err != nil {
				return err
			}
			out, err := exec.Command("findmnt", "-n", "-o", "SOURCE", dir).Output()
			if err != nil {
				return fmt.Errorf("findmnt %s: %v", dir, err)
			}
			dev := filepath.Base(strings.TrimSpace(string(out)))
			if err := r.Set("/sys/block/"+dev+"/queue/write_cache", "write through"); err != nil {
				return err
			}
			inDir(dir, func() { r.Postgres(testdb.Options{}) })
			return nil
		},
	})
}
