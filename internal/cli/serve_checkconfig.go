package cli

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	yamlv2 "go.yaml.in/yaml/v2"
	"golang.org/x/crypto/bcrypt"

	"github.com/dbhost/dbhost/internal/budget"
	"github.com/dbhost/dbhost/internal/host"
	"github.com/dbhost/dbhost/internal/metrics"
	"github.com/dbhost/dbhost/internal/termsafe"
	"github.com/dbhost/dbhost/internal/textio"
	"github.com/dbhost/dbhost/internal/waiver"
)

// maxWebConfig bounds the web configuration read: it is a few lines, and a
// device or a huge file named by mistake must not hang the check.
const maxWebConfig = 1 << 20

// judge is --check-config: it judges everything serve reads at start, without listening
// and without auditing, so that a configuration can be refused before a
// service restarts with it (the Ansible role validates web.yml and serve's
// flags with it). Each item judged is one line: on stdout when good, on
// stderr naming what is wrong. ExitError when anything is.
func (sf *serveFlags) judge(env Env) int {
	if len(sf.addrs) == 0 {
		sf.addrs = listFlag{":9437"} // as serve: exposure() judges them
	}
	bad := 0
	say := func(what string, err error) {
		if err != nil {
			bad++
			fmt.Fprintln(env.Stderr, "dbhost serve:", termsafe.Line(what+": "+err.Error()))
			return
		}
		fmt.Fprintln(env.Stdout, termsafe.Line(what))
	}

	if sf.systemdSocket {
		say("listen on systemd's sockets (--web.systemd-socket; --web.listen-address is not used)", nil)
	} else {
		seen := map[string]bool{}
		for _, a := range sf.addrs {
			where, err := listenAddress(a)
			if err == nil && seen[a] {
				err = errors.New("given twice: the second listener would fail")
			}
			seen[a] = true
			if err != nil {
				say("listen "+a, err)
			} else {
				say("listen "+a+": "+where, nil)
			}
		}
	}

	webOK := true
	if sf.webConfig == "" {
		say("web config: none (plain HTTP, no basic auth)", nil)
	} else if judged, err := webConfigSummary(sf.webConfig); err != nil {
		say("web config "+sf.webConfig, err)
		webOK = false
	} else {
		say("web config "+sf.webConfig+": "+judged, nil)
	}
	if why := sf.exposure(); webOK && why != "" {
		say("security checks' findings withheld from /metrics: "+why, nil)
	}

	if sf.interval < time.Second {
		say(fmt.Sprintf("interval %v", sf.interval), errors.New("too short (at least 1s)"))
	} else {
		timeout := sf.auditTimeout
		if timeout <= 0 || timeout > sf.interval {
			timeout = sf.interval // as the exporter bounds it
		}
		say(fmt.Sprintf("interval %v, audit timeout %v, database timeout %v", sf.interval, timeout, sf.dbTimeout), nil)
	}

	toggles, err := sf.collectors.toggles()
	var set *metrics.Set
	if err == nil {
		set, err = metrics.NewSet(toggles)
	}
	if err != nil {
		say("collectors", err)
	} else {
		say("collectors: "+strings.Join(set.Names(), ", "), nil)
	}

	if err := validSelection(sf.only, sf.skip); err != nil {
		say("checks", err)
	} else {
		say("checks: "+selectionText(sf.only, sf.skip), nil)
	}

	var level slog.Level
	if err := level.UnmarshalText([]byte(sf.logLevel)); err != nil {
		say("log level "+sf.logLevel, err)
	} else {
		say("log level "+strings.ToLower(level.String()), nil)
	}

	h, err := host.Open(sf.root)
	if err != nil {
		// Without the root neither the waivers nor the budget's file
		// can be read.
		say("root "+sf.root, err)
		return sf.checked(env, bad)
	}
	defer h.Close()

	wf, err := sf.waivers.choose(func() (*waiver.File, error) { return waiver.ReadHost(h, waiver.DefaultPath) })
	switch {
	case err != nil:
		say("waivers", err)
	case wf == nil && sf.waivers.none:
		say("waivers: none (--no-waivers)", nil)
	case wf == nil:
		say("waivers: none (no "+waiver.DefaultPath+")", nil)
	default:
		say(fmt.Sprintf("waivers %s: %s", wf.Name, plural(len(wf.Entries), "waiver")), nil)
	}

	spec, source, err := sf.shares.resolve(sf.root, true)
	if err == nil && spec != "" {
		_, err = budget.Parse(spec)
	}
	switch {
	case err != nil && source != "":
		say("budget "+source, err)
	case err != nil:
		say("budget", err)
	case spec == "":
		say("budget: none (dbhost's own rule)", nil)
	default:
		say("budget "+source+": "+spec, nil)
	}
	return sf.checked(env, bad)
}

// checked ends --check-config: ExitError when any item was wrong.
func (sf *serveFlags) checked(env Env, bad int) int {
	if bad > 0 {
		fmt.Fprintf(env.Stderr, "dbhost serve: --check-config: %s wrong\n", plural(bad, "item"))
		return ExitError
	}
	return ExitOK
}

// selectionText says which checks serve runs.
func selectionText(only, skip []string) string {
	s := "all"
	if len(only) > 0 {
		s = "only " + strings.Join(only, ", ")
	}
	if len(skip) > 0 {
		s += "; skip " + strings.Join(skip, ", ")
	}
	return s
}

// plural is "1 user", "2 users".
func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}

// listenAddress judges an address as net.Listen and the toolkit will read
// it, without listening and without resolving a name, and says where it
// listens.
func listenAddress(a string) (string, error) {
	if strings.HasPrefix(a, "vsock://") {
		u, err := url.Parse(a)
		if err != nil {
			return "", err
		}
		_, p, err := net.SplitHostPort(u.Host)
		if err != nil {
			return "", err
		}
		if _, err := strconv.ParseUint(p, 10, 32); err != nil {
			return "", fmt.Errorf("vsock port %q is not a number", p)
		}
		return "vsock port " + p, nil
	}
	h, p, err := net.SplitHostPort(a)
	if err != nil {
		return "", err
	}
	if p == "" {
		return "", errors.New("no port")
	}
	port, err := net.LookupPort("tcp", p)
	if err != nil {
		return "", fmt.Errorf("port %q: not a number from 1 to 65535 nor a service of /etc/services", p)
	}
	if port == 0 {
		return "", errors.New("port 0 would pick a free port at random, where no scraper looks")
	}
	if h == "" {
		return "every interface", nil
	}
	if ip := net.ParseIP(strings.SplitN(h, "%", 2)[0]); ip != nil {
		switch {
		case ip.IsLoopback():
			return "loopback", nil
		case ip.IsUnspecified():
			return "every interface", nil
		}
		return "one address", nil
	}
	if !hostName.MatchString(h) || len(h) > 253 {
		return "", fmt.Errorf("%q is neither an IP address nor a host name", h)
	}
	if h == "localhost" {
		return "loopback", nil
	}
	return "a name, resolved at start", nil
}

// hostName is a DNS name's syntax: labels of letters, digits and hyphens.
var hostName = textio.LazyRegexp(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$`)

// quoted are the values the YAML parser quotes in its errors ("cannot
// unmarshal !!str `secretp...`"): a password put where a map belongs.
var quoted = textio.LazyRegexp("\\s*`[^`]*`")

// yamlError is a YAML error without the values it quotes, on one line
// (the parser lists each error on a line of its own).
func yamlError(err error) error {
	return errors.New(strings.Join(strings.Fields(quoted.ReplaceAllString(err.Error(), "")), " "))
}

// webConfigSummary judges an exporter-toolkit web configuration with the
// toolkit's own loader (web.Validate: its strict YAML parse, bcrypt hashes,
// the TLS certificate and key read as a pair), as serve will at start, and
// says what it sets. No message shows a hash, a key or a password: the
// YAML parser's quoted values are cut, and a bad hash is named by its user
// only (bcrypt's error quotes its first byte, of a password given by
// mistake).
func webConfigSummary(file string) (string, error) {
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return "", err
	} else if !fi.Mode().IsRegular() {
		return "", errors.New("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, maxWebConfig+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxWebConfig {
		return "", fmt.Errorf("more than %d bytes", maxWebConfig)
	}
	var c web.Config
	if err := yamlv2.UnmarshalStrict(b, &c); err != nil {
		return "", yamlError(err)
	}
	var users, badHash []string
	for name, hash := range c.Users {
		users = append(users, name)
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			badHash = append(badHash, name)
		}
	}
	sort.Strings(badHash)
	if len(badHash) > 0 {
		return "", fmt.Errorf("basic_auth_users: not a bcrypt hash for %s (htpasswd -nBC 10 USER makes one)", strings.Join(badHash, ", "))
	}
	// The file read above is the one the toolkit reads; what it refuses
	// beyond it (TLS files, headers, client auth) names no secret.
	if err := web.Validate(file); err != nil {
		return "", yamlError(err)
	}

	var parts []string
	t := c.TLSConfig
	if t.IsEnabled() {
		// Relative paths are the file's directory's, as the toolkit reads them.
		t.SetDirectory(filepath.Dir(file))
		cert, key := t.TLSCertPath, t.TLSKeyPath
		if cert == "" {
			cert = "inline"
		}
		if key == "" {
			key = "inline"
		}
		s := "TLS (cert " + cert + ", key " + key
		notAfter, err := certExpiry(t)
		if err != nil {
			return "", err
		}
		if time.Now().After(notAfter) {
			return "", fmt.Errorf("TLS certificate %s expired on %s", cert, notAfter.UTC().Format(time.DateOnly))
		}
		s += ", valid until " + notAfter.UTC().Format(time.DateOnly)
		if t.ClientAuth != "" && t.ClientAuth != "NoClientCert" {
			s += ", client certificates " + t.ClientAuth
		}
		parts = append(parts, s+")")
	} else {
		parts = append(parts, "no TLS")
	}
	if len(users) > 0 {
		parts = append(parts, "basic auth for "+plural(len(users), "user"))
	} else {
		parts = append(parts, "no basic auth")
	}
	return strings.Join(parts, ", "), nil
}

// certExpiry is when the serving certificate (the first of its file, or
// of the inline text) expires; web.Validate has read it as a pair with
// its key already.
func certExpiry(t web.TLSConfig) (time.Time, error) {
	data := []byte(t.TLSCert)
	if t.TLSCertPath != "" {
		var err error
		if data, err = os.ReadFile(t.TLSCertPath); err != nil {
			return time.Time{}, err
		}
	}
	for {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			return time.Time{}, errors.New("TLS certificate: no CERTIFICATE block")
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return time.Time{}, fmt.Errorf("TLS certificate: %w", err)
		}
		return c.NotAfter, nil
	}
}
