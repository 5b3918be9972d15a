package check_test

import (
	"strings"
	"testing"

	"github.com/dbhost/dbhost/internal/check"
	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fixture"
	"github.com/dbhost/dbhost/internal/host"
)

// No MongoDB can be installed on this VM (Debian ships none), so
// kernel.mongodb_minimum is judged on a recorded host with a MongoDB
// instance added and the kernel and C library versions replaced: a table
// test of the evaluator on literal inputs.
func TestKernelMongoDBMinimum(t *testing.T) {
	base := fixture.Facts(t, "limits-nofile-1024")
	for _, c := range []struct {
		kernel, glibc, mongo string
		want                 check.Status
		frag                 string
	}{
		{"6.18.44-fc-v657", "2.36", "8.0.4", check.Pass, "meet MongoDB's minimums"},
		{"6.19.2-arch1-1", "2.41", "8.0.4", check.Fail, "6.19 through 7.0.13"},
		{"7.0.14-200.fc43.x86_64", "2.42", "8.2.1", check.Pass, "outside the 6.19-7.0.13 range"},
		{"6.19.2-arch1-1", "2.41", "7.0.12", check.Pass, ""},
		{"6.19.2-arch1-1", "2.41", "", check.Unknown, "version is unknown"},
		{"2.6.32-754.el6.x86_64", "2.12", "3.4.24", check.Fail, "older than 2.6.36"},
		{"3.10.0-1160.el7.x86_64", "2.12", "3.6.23", check.Fail, "glibc 2.12 is older than 2.13"},
	} {
		f := *base
		f.System.Kernel = host.Reading{Value: c.kernel, Source: "/proc/sys/kernel/osrelease"}
		f.System.Glibc = host.Reading{Value: c.glibc, Source: "getconf GNU_LIBC_VERSION"}
		f.Instances = []*facts.Instance{{Instance: &engine.Instance{Engine: engine.MongoDB, Flavor: "MongoDB", Version: c.mongo, PID: 4242, Port: 27017}}}
		fds := check.Run(&f, check.Selector{Only: []string{"kernel.mongodb_minimum"}})
		if len(fds) != 1 || fds[0].Status != c.want {
			t.Errorf("kernel %s glibc %s MongoDB %q: %+v, want %s", c.kernel, c.glibc, c.mongo, fds, c.want)
			continue
		}
		hxHas(t, c.kernel, fds[0].Reason, c.frag)
	}
	if st := hxStatuses(t, "limits-nofile-1024", "kernel.mongodb_minimum"); len(st) != 0 {
		t.Errorf("no MongoDB, yet judged: %v", st)
	}
	// The same on recorded hosts with the mongod stand-in.
	mongo := hxPrivate(t, "mongo-6", "mongodb")
	hxFind(t, "mongo-6", "kernel.mongodb_minimum", mongo, check.Pass)
	fd := hxFind(t, "kernel-mongo-old", "kernel.mongodb_minimum", mongo, check.Fail)
	hxHas(t, "reason", fd.Reason, "older than 2.6.36", "glibc 2.12 is older than 2.13")
	fd = hxFind(t, "kernel-mongo-noglibc", "kernel.mongodb_minimum", mongo, check.Unknown)
	hxHas(t, "reason", fd.Reason, "getconf")
}

func TestKernelGlibcCollation(t *testing.T) {
	// initdb --locale=C.UTF-8: nothing glibc can reorder.
	fd := hxFind(t, "limits-nofile-1024", "kernel.glibc_collation", "postgres:5432", check.Pass)
	hxHas(t, "reason", fd.Reason, "C/POSIX collation or ICU")
	// glibc 2.17: the C.UTF-8 cluster is unaffected; the en_US.UTF-8
	// database must plan a REINDEX into the OS upgrade.
	hxFind(t, "kernel-glibc-2.17", "kernel.glibc_collation", "postgres:5432", check.Pass)
	fd = hxFind(t, "kernel-glibc-2.17", "kernel.glibc_collation", hxPrivate(t, "kernel-glibc-2.17", "postgres"), check.Fail)
	hxHas(t, "reason", fd.Reason, "glibc 2.17 predates")
	if fd.Fix == nil || !strings.Contains(fd.Fix.Manual, "REINDEX") {
		t.Errorf("fix %+v", fd.Fix)
	}
	// A database with an en_US.UTF-8 collation whose version PostgreSQL
	// records: pg.collation_glibc compares it.
	pg := hxPrivate(t, "pg-collation-mismatch", "postgres")
	fd = hxFind(t, "pg-collation-mismatch", "kernel.glibc_collation", pg, check.Pass)
	hxHas(t, "reason", fd.Reason, "pg.collation_glibc")
	// No live connection (peer authentication refuses root).
	pg = hxPrivate(t, "pg-peer", "postgres")
	fd = hxFind(t, "pg-peer", "kernel.glibc_collation", pg, check.Unknown)
	hxHas(t, "reason", fd.Reason, "no live connection", "REINDEX")
}
