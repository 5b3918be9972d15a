package redis

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/host"
)

// live is what the running server said about itself, without a password:
// dbhost never sends credentials to Redis. The whole exchange is one host
// probe, so a snapshot replays it.
type live struct {
	// Via is the address that answered ("unix:/run/redis.sock",
	// "tcp:127.0.0.1:6379").
	Via string `json:"via"`
	// AuthRequired: the server refused an unauthenticated command
	// (NOAUTH, or NOPERM for a default user without rights).
	AuthRequired bool              `json:"auth_required,omitempty"`
	Info         map[string]string `json:"info,omitempty"`
	// Config is CONFIG GET *, secrets replaced by a marker.
	Config map[string]string `json:"config,omitempty"`
	// ConfigErr says why CONFIG GET was refused (renamed, ACL).
	ConfigErr string `json:"config_error,omitempty"`
	// Tried lists the addresses that did not answer, and why.
	Tried []string `json:"tried,omitempty"`
}

// errNoAnswer is returned when no candidate address answered.
var errNoAnswer = errors.New("no address answered")

// readLive asks the server at the first candidate address that answers.
func readLive(ctx context.Context, h *host.Host, pid int, addrs []string, timeout time.Duration) (*live, error) {
	if timeout <= 0 {
		timeout = 3 * time.Second
	}
	key := fmt.Sprintf("redis:%d:%s", pid, strings.Join(addrs, ","))
	b, err := h.Probe(key, func() ([]byte, error) {
		l := ask(ctx, h, &engine.Instance{PID: pid}, addrs, timeout)
		return json.Marshal(l)
	})
	if err != nil {
		return nil, err
	}
	var l live
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, err
	}
	if l.Via == "" {
		return &l, fmt.Errorf("%w: %s", errNoAnswer, strings.Join(l.Tried, "; "))
	}
	return &l, nil
}

// ask tries the addresses in turn. Each must lead to the server's own
// process (engine.Instance.Dial): an address its configuration names can
// be held by another server, or by a user's look-alike.
func ask(ctx context.Context, h *host.Host, in *engine.Instance, addrs []string, timeout time.Duration) *live {
	l := &live{}
	conn, via, tried := dialFirst(ctx, h, in, addrs, timeout, func(conn net.Conn) error {
		l.Info, l.Config, l.ConfigErr, l.AuthRequired = nil, nil, "", false
		return converse(conn, l, timeout)
	})
	l.Tried = tried
	if conn == nil {
		l.Info, l.Config, l.ConfigErr, l.AuthRequired = nil, nil, "", false
		return l
	}
	conn.Close()
	l.Via = via
	return l
}

// dialFirst connects to the first of addrs ("unix:PATH", "tcp:HOST:PORT")
// that leads to the instance's own process (engine.Instance.Dial) and on
// which hello succeeds, and returns that connection, open, with the
// address; tried says why each earlier one failed. Nothing is sent before
// the peer is verified, and no credentials are ever sent.
func dialFirst(ctx context.Context, h *host.Host, in *engine.Instance, addrs []string, timeout time.Duration, hello func(net.Conn) error) (net.Conn, string, []string) {
	var tried []string
	for _, a := range addrs {
		network, addr, _ := strings.Cut(a, ":")
		conn, err := in.Dial(ctx, h, network, addr, timeout)
		if err != nil {
			tried = append(tried, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		if err := hello(conn); err != nil {
			conn.Close()
			tried = append(tried, fmt.Sprintf("%s: %v", a, err))
			continue
		}
		return conn, a, tried
	}
	return nil, "", tried
}

// converse sends INFO server and CONFIG GET * and reads the replies.
func converse(conn net.Conn, l *live, timeout time.Duration) error {
	conn.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(conn)
	if err := askInfo(conn, r, l); err != nil || l.AuthRequired {
		return err
	}
	cfg, err := command(conn, r, "CONFIG", "GET", "*")
	var re respError
	if errors.As(err, &re) {
		l.ConfigErr = string(re)
		return nil
	}
	if err != nil {
		return err
	}
	arr, ok := cfg.([]any)
	if !ok {
		return errors.New("CONFIG GET: unexpected reply")
	}
	l.Config = map[string]string{}
	for i := 0; i+1 < len(arr); i += 2 {
		k, _ := arr[i].(string)
		v, _ := arr[i+1].(string)
		if k == "" {
			continue
		}
		if secretSetting(k) && v != "" {
			v = host.Redacted // never recorded, never shown
		}
		l.Config[strings.ToLower(k)] = v
	}
	return nil
}

func parseInfo(s string) map[string]string {
	m := map[string]string{}
	for _, ln := range strings.Split(s, "\n") {
		ln = strings.TrimSpace(ln)
		if ln == "" || ln[0] == '#' {
			continue
		}
		if k, v, ok := strings.Cut(ln, ":"); ok {
			m[k] = v
		}
	}
	return m
}

// respError is an error reply ("-NOAUTH Authentication required.").
type respError string

func (e respError) Error() string { return string(e) }

func (e respError) kind() string {
	k, _, _ := strings.Cut(string(e), " ")
	return k
}

// command sends one command as a RESP array and reads its reply.
func command(w io.Writer, r *bufio.Reader, args ...string) (any, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return nil, err
	}
	return readReply(r, 0)
}

// Bounds on what a reply may hold; a server's INFO and CONFIG are a few
// kilobytes.
const (
	maxBulk  = 16 << 20
	maxArray = 1 << 16
)

// readReply reads one RESP2 reply: +simple, -error, :integer, $bulk,
// *array.
func readReply(r *bufio.Reader, depth int) (any, error) {
	if depth > 4 {
		return nil, errors.New("reply nested too deeply")
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return nil, errors.New("empty reply line")
	}
	body := line[1:]
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n > maxBulk {
			return nil, fmt.Errorf("bad bulk length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n > maxArray {
			return nil, fmt.Errorf("bad array length %q", body)
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, 0, n)
		for i := 0; i < n; i++ {
			v, err := readReply(r, depth+1)
			if err != nil {
				var re respError
				if !errors.As(err, &re) {
					return nil, err
				}
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unexpected reply %q", line)
}
