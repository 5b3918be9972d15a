package workload

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dbhost/dbhost/internal/textio"
)

// Streams a tool writes to.
const (
	stdout = 1
	stderr = 2
)

// tool is one external benchmark process.
type tool struct {
	bin  string
	args []string
	env  []string
	dir  string
	cred *syscall.Credential
	// line receives every output line as it arrives, from one goroutine
	// at a time.
	line func(stream int, s string)
	// keep filters the lines kept in the output tail (nil: all).
	keep func(s string) bool
}

// outputTail is how much of a tool's output a Result or error carries.
const outputTail = 8 << 10

// maxLine bounds one output line; longer ones are cut (no tool of ours
// writes them, but a broken one must not exhaust memory).
const maxLine = 64 << 10

// run starts the tool and waits for it. The process gets its own process
// group, killed as a whole when ctx ends. It returns the tail of the output
// (stderr and stdout interleaved as read) and the exit error.
func (t *tool) run(ctx context.Context) (tail string, err error) {
	cmd := exec.CommandContext(ctx, t.bin, t.args...)
	cmd.Env = t.env
	cmd.Dir = t.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: t.cred}
	cmd.Cancel = func() error {
		// The tool's threads and any children go too.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = 5 * time.Second
	outR, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	errR, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("start %s: %w", filepath.Base(t.bin), err)
	}
	var (
		mu   sync.Mutex
		ring tailBuffer
		wg   sync.WaitGroup
	)
	read := func(r io.Reader, stream int) {
		defer wg.Done()
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			s, rerr := readLine(br)
			if s != "" || rerr == nil {
				mu.Lock()
				if t.line != nil {
					t.line(stream, s)
				}
				if t.keep == nil || t.keep(s) {
					ring.add(s)
				}
				mu.Unlock()
			}
			if rerr != nil {
				return
			}
		}
	}
	wg.Add(2)
	go read(outR, stdout)
	go read(errR, stderr)
	wg.Wait()
	err = cmd.Wait()
	if ctx.Err() != nil {
		err = fmt.Errorf("%s stopped: %w", filepath.Base(t.bin), ctx.Err())
	}
	return ring.String(), err
}

// readLine reads one line without its newline, cutting overlong ones.
func readLine(br *bufio.Reader) (string, error) {
	var b []byte
	for {
		frag, err := br.ReadSlice('\n')
		if len(b) < maxLine {
			b = append(b, frag[:min(len(frag), maxLine-len(b))]...)
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		s := strings.TrimRight(string(b), "\r\n")
		if err == nil {
			return s, nil
		}
		if len(s) > 0 && err == io.EOF {
			return s, nil
		}
		return s, err
	}
}

// tailBuffer keeps the last outputTail bytes of whole lines.
type tailBuffer struct {
	lines []string
	size  int
	cut   bool
}

func (b *tailBuffer) add(s string) {
	if len(s) > outputTail {
		s = s[len(s)-outputTail:]
	}
	b.lines = append(b.lines, s)
	b.size += len(s) + 1
	for b.size > outputTail && len(b.lines) > 1 {
		b.size -= len(b.lines[0]) + 1
		b.lines = b.lines[1:]
		b.cut = true
	}
}

func (b *tailBuffer) String() string {
	s := strings.Join(b.lines, "\n")
	if b.cut {
		s = "[...]\n" + s
	}
	return s
}

// exitError turns a tool's exit into an error with the lines that explain
// it (errors reported by the tool, else the output's end).
func exitError(name string, err error, why []string, tail string) error {
	var ee *exec.ExitError
	status := ""
	switch {
	case errors.As(err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			status = "killed by signal " + ws.Signal().String()
		} else {
			status = fmt.Sprintf("exit status %d", ee.ExitCode())
		}
	case err != nil:
		status = err.Error()
	}
	msg := strings.Join(firstN(distinct(why), 4), "; ")
	if msg == "" {
		msg = textio.LastLines(tail, 3)
	}
	switch {
	case status != "" && msg != "":
		return fmt.Errorf("%s failed (%s): %s", name, status, msg)
	case status != "":
		return fmt.Errorf("%s failed (%s)", name, status)
	default:
		return fmt.Errorf("%s failed: %s", name, msg)
	}
}

var digits = textio.LazyRegexp(`[0-9]+`)

// distinct drops messages that differ from an earlier one only in numbers
// (the client, the line, the value), saying how many were alike.
func distinct(msgs []string) []string {
	var out []string
	idx := map[string]int{}
	alike := map[int]int{}
	for _, m := range msgs {
		k := digits.ReplaceAllString(m, "#")
		if i, ok := idx[k]; ok {
			alike[i]++
			continue
		}
		idx[k] = len(out)
		out = append(out, m)
	}
	for i, n := range alike {
		out[i] += fmt.Sprintf(" (%d more alike)", n)
	}
	return out
}

func firstN(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], fmt.Sprintf("(%d more)", len(s)-n))
	}
	return s
}

// toolEnv is the tools' environment: the caller's, without the connection
// variables dbhost sets itself, with the C locale (the parsers expect its
// number format) and the password when there is one.
func toolEnv(home string, extra ...string) []string {
	drop := map[string]bool{"PGPASSWORD": true, "PGHOST": true, "PGHOSTADDR": true, "PGPORT": true,
		"PGUSER": true, "PGDATABASE": true, "PGSERVICE": true, "MYSQL_PWD": true, "MYSQL_HOST": true,
		"MYSQL_TCP_PORT": true, "MYSQL_UNIX_PORT": true, "LANG": true, "LANGUAGE": true, "HOME": true}
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[k] && !strings.HasPrefix(k, "LC_") {
			env = append(env, kv)
		}
	}
	env = append(env, "LC_ALL=C")
	if home != "" {
		env = append(env, "HOME="+home)
	}
	return append(env, extra...)
}

// workDir makes the tool's private working directory, owned by the user it
// runs as, and returns its credential (nil: this process's user) and home.
func workDir(t Target, parent, prefix string) (dir string, cred *syscall.Credential, home string, err error) {
	dir, err = os.MkdirTemp(parent, "dbhost-"+prefix+"-")
	if err != nil {
		return "", nil, "", err
	}
	home = os.Getenv("HOME")
	if t.OSUser == "" {
		return dir, nil, home, nil
	}
	u, err := user.Lookup(t.OSUser)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, "", fmt.Errorf("system user %q: %w", t.OSUser, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid != os.Geteuid() {
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", nil, "", fmt.Errorf("give %s to %s: %w", dir, t.OSUser, err)
		}
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}
	}
	return dir, cred, u.HomeDir, nil
}

// copyInto copies a script into the private directory, readable by the
// tool's user (the original may sit where that user cannot read).
func copyInto(dir string, cred *syscall.Credential, src string) (string, error) {
	b, err := os.ReadFile(src)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dst, int(cred.Uid), int(cred.Gid)); err != nil {
			return "", err
		}
	}
	return dst, nil
}

// findBin resolves a tool: the explicit path, else for pgbench the newest
// PostgreSQL's own binary (Debian's /usr/bin/pgbench is a wrapper that
// picks a version by cluster), else PATH.
func findBin(explicit, name string) (string, error) {
	if explicit != "" {
		if _, err := os.Stat(explicit); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return explicit, nil
	}
	if name == "pgbench" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
		sort.Slice(dirs, func(a, b int) bool {
			va, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[a]))))
			vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(dirs[b]))))
			return va < vb
		})
		if len(dirs) > 0 {
			return dirs[len(dirs)-1], nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s not installed: %w", name, err)
	}
	return p, nil
}

// runChecked runs a tool whose line callback feeds out, then lets out
// validate the run (exit status and output). A cancelled run returns the
// cancellation without judging the output.
func runChecked(ctx context.Context, tl *tool, out interface{ check(error, string) error }) (string, error) {
	tail, err := tl.run(ctx)
	if ctx.Err() != nil {
		return tail, err
	}
	return tail, out.check(err, tail)
}
