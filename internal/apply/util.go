package apply

import (
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/dbhost/dbhost/internal/safefile"
)

// readNoFollow reads a regular file without following a link at its name
// (for the plan, which may run as any user).
func readNoFollow(full string) ([]byte, safefile.FileInfo, error) {
	fd, err := unix.Open(full, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, safefile.FileInfo{}, &os.PathError{Op: "open", Path: full, Err: err}
	}
	f := os.NewFile(uintptr(fd), full)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, safefile.FileInfo{}, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, safefile.FileInfo{}, fmt.Errorf("%s is not a regular file", full)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxFile+1))
	if err != nil {
		return nil, safefile.FileInfo{}, err
	}
	if len(b) > maxFile {
		return nil, safefile.FileInfo{}, fmt.Errorf("%s is larger than %d bytes", full, maxFile)
	}
	return b, safefile.FileInfo{Mode: os.FileMode(st.Mode & 0o777), UID: int(st.Uid), GID: int(st.Gid)}, nil
}

// diff is a line diff of a small file in unified style (without hunk
// headers: the files are a few dozen lines).
func diff(name, a, b string) string {
	if a == b {
		return ""
	}
	x, y := lines(a), lines(b)
	// Longest common subsequence, table from the end.
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	from := "a" + name
	if a == "" {
		from = "/dev/null"
	}
	fmt.Fprintf(&out, "--- %s\n+++ b%s\n", from, name)
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out.WriteString(" " + x[i] + "\n")
			i, j = i+1, j+1
		case j < len(y) && (i == len(x) || lcs[i][j+1] >= lcs[i+1][j]):
			out.WriteString("+" + y[j] + "\n")
			j++
		default:
			out.WriteString("-" + x[i] + "\n")
			i++
		}
	}
	return out.String()
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
