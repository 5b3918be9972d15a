package testdb

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Restart stops the server and starts it again with the same command line
// (read from /proc/PID/cmdline; a prlimit wrapper's limit is not kept),
// waiting until it accepts connections on its socket. The server stays
// under the test's control: it is stopped at the end of the test as
// before. It is the restart a test hands to code that restarts a database
// (knob.Target.Restart). Call it from the test's goroutine or a cleanup.
func (s *Server) Restart(ctx context.Context) error {
	if s.cmd == nil {
		return errors.New("testdb: server not running")
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", s.PID))
	if err != nil {
		return fmt.Errorf("testdb: reading the server's command line: %w", err)
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	cred := s.cmd.SysProcAttr.Credential
	sig := syscall.SIGTERM
	if s.Engine == "postgres" {
		sig = syscall.SIGINT
	}
	s.cmd.Process.Signal(sig)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true}
	cmd.Dir = s.Dir
	log, err := os.OpenFile(s.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd.Stdout, cmd.Stderr = log, log
	err = cmd.Start()
	log.Close()
	if err != nil {
		s.cmd = nil
		return fmt.Errorf("testdb: restart %s: %w", args[0], err)
	}
	exited := make(chan struct{})
	s.cmd, s.PID, s.exited = cmd, cmd.Process.Pid, exited
	go func() { cmd.Wait(); close(exited) }()
	sock := s.Socket
	if s.Engine == "postgres" {
		sock = filepath.Join(s.Socket, ".s.PGSQL."+strconv.Itoa(s.Port))
	}
	for {
		if dial("unix", sock) && (s.Engine != "postgres" || pgReady(s.DataDir)) {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("testdb: %s exited while restarting; log:\n%s", s.Engine, s.Log())
		case <-ctx.Done():
			return fmt.Errorf("testdb: %s not ready after restart: %w", s.Engine, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
