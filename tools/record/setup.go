package main

import (
	"os"
	"os/exec"

	"github.com/dbhost/dbhost/internal/engine/mongo/mongotest"
	"github.com/dbhost/dbhost/internal/testdb"
)

// Setups for the scenarios that make one kind of change and nothing else,
// so that each scenario states only what it changes.

// sysctlSetup sets kernel parameters (name, value pairs), in order.
func sysctlSetup(kv ...string) func(*Run) error {
	return func(r *Run) error { return sysctls(r, kv...) }
}

// thpSetup sets THP enabled and defrag.
func thpSetup(enabled, defrag string) func(*Run) error {
	return func(r *Run) error { return thp(r, enabled, defrag) }
}

// postgresSetup starts a private PostgreSQL.
func postgresSetup(o testdb.Options) func(*Run) error {
	return func(r *Run) error { r.Postgres(o); return nil }
}

// mariaDBSetup starts a private MariaDB.
func mariaDBSetup(o testdb.Options) func(*Run) error {
	return func(r *Run) error { r.MariaDB(o); return nil }
}

// redisSetup starts a private Redis.
func redisSetup(o testdb.Options) func(*Run) error {
	return func(r *Run) error { r.Redis(o); return nil }
}

// mongoSetup starts a mongod stand-in.
func mongoSetup(o mongotest.Options) func(*Run) error {
	return func(r *Run) error { mongotest.Start(r.tb, o); return nil }
}

// sysctls sets several kernel parameters through the journal.
func sysctls(r *Run, kv ...string) error {
	for i := 0; i+1 < len(kv); i += 2 {
		if err := r.Sysctl(kv[i], kv[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// tempDir makes a private temporary directory, removed after collection.
func tempDir(r *Run, prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	r.Cleanup(func() { os.RemoveAll(dir) })
	return dir, nil
}

// sharedTempDir is a tempDir others may enter (mode 0755): the private
// servers run as their own users and read what is put there.
func sharedTempDir(r *Run, prefix string) (string, error) {
	dir, err := tempDir(r, prefix)
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o755)
}

// mountAt mounts dev at mnt (created, and removed with storageRoot
// afterwards), open to every user like /tmp: the private servers make
// their directories, and MariaDB its temporary files (TMPDIR points here),
// below it. Cleanups unmount it after the servers on it stopped, as theirs
// are registered later.
func mountAt(r *Run, fstype, opts, dev, mnt string) error {
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	r.Cleanup(func() { os.Remove(mnt); os.Remove(storageRoot) })
	if err := r.Command("mount", "-t", fstype, "-o", opts, dev, mnt); err != nil {
		return err
	}
	r.Cleanup(func() {
		if err := exec.Command("umount", mnt).Run(); err != nil {
			exec.Command("umount", "-l", mnt).Run()
		}
	})
	return os.Chmod(mnt, 0o1777)
}

// withEnv runs fn with the environment variable name set to value, and puts
// back what was there (or its absence) afterwards.
func withEnv(name, value string, fn func()) {
	old, had := os.LookupEnv(name)
	os.Setenv(name, value)
	defer func() {
		if had {
			os.Setenv(name, old)
		} else {
			os.Unsetenv(name)
		}
	}()
	fn()
}
