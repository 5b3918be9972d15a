package galeralab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/dbhost/dbhost/internal/journal"
	"github.com/dbhost/dbhost/internal/safefile"
)

// Journal kinds of a lab. The lab keeps its own: its undos find processes
// by the namespace they run in and remove a directory only when it holds
// the lab's marker, which none of internal/change's kinds expresses.
// Processes have no entry of their own: each runs only in a member's
// namespace, journaled before it was made, whose undo ends every process
// in it (a server, garbd, a state transfer's rsync) before deleting it.
const (
	kindDir   = "galeralab-dir"      // Root/NAME with its marker
	kindNetns = "galeralab-netns"    // a namespace, and every process in it
	kindVeth  = "galeralab-veth"     // a veth pair, made inside the namespaces
	kindRules = "galeralab-iptables" // DROP rules of a partition in one namespace
)

// markerName is the file in a lab's directory that proves dbhost made it;
// its content is a random token also kept in the journal.
const markerName = ".dbhost-galeralab"

// nsPrefix starts every namespace a lab makes; the undo refuses others.
const nsPrefix = "dbhost-lab-"

func kinds() journal.Kinds {
	return journal.Kinds{
		kindDir:   undoDir,
		kindNetns: undoNetns,
		kindVeth:  undoVeth,
		kindRules: undoRules,
	}
}

// Kinds are the lab's undos, for whoever recovers a journal that may hold
// them.
func Kinds() journal.Kinds { return kinds() }

type dirRecord struct {
	Dir   string `json:"dir"`
	Token string `json:"token"`
}

type netnsRecord struct {
	Name string `json:"name"`
}

type vethRecord struct {
	Netns string `json:"netns"` // the hub, where the link's end lives
	Link  string `json:"link"`
}

type rulesRecord struct {
	Netns string     `json:"netns"`
	Rules [][]string `json:"rules"` // iptables arguments after -A/-D: CHAIN spec...
}

func checkNs(name string) error {
	if !strings.HasPrefix(name, nsPrefix) || strings.ContainsAny(name, "/\x00") || len(name) > 64 {
		return fmt.Errorf("namespace %q is not a lab's", name)
	}
	return nil
}

func undoDir(data json.RawMessage) error {
	var r dirRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	if !filepath.IsAbs(r.Dir) || filepath.Clean(r.Dir) != r.Dir || r.Dir == "/" || len(r.Token) < 16 {
		return fmt.Errorf("lab directory record %q: not a clean absolute path with a token", r.Dir)
	}
	there, err := safefile.DirToRemove(r.Dir)
	if !there {
		return err
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, markerName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// Made, not yet marked (a crash right after mkdir): only an
		// empty directory is removed.
		if err := os.Remove(r.Dir); err == nil || errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("%s has no lab marker and is not empty: not removing it", r.Dir)
	case err != nil:
		return err
	case strings.TrimSpace(string(b)) != r.Token:
		return fmt.Errorf("%s: its marker does not hold this lab's token: not removing it", r.Dir)
	}
	return os.RemoveAll(r.Dir)
}

// checkMarker reports why dir is not a lab's directory.
func checkMarker(dir string) error {
	fi, err := os.Lstat(filepath.Join(dir, markerName))
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("its marker is not a regular file")
	}
	return nil
}

func undoNetns(data json.RawMessage) error {
	var r netnsRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	if err := checkNs(r.Name); err != nil {
		return err
	}
	if !nsExists(r.Name) {
		return nil
	}
	if err := killNetns(r.Name, 10*time.Second); err != nil {
		return err
	}
	b, err := trustedBins()
	if err != nil {
		return err
	}
	if out, err := b.run(context.Background(), b.ip, "netns", "delete", r.Name); err != nil && nsExists(r.Name) {
		return fmt.Errorf("ip netns delete %s: %v: %s", r.Name, err, out)
	}
	return nil
}

func undoVeth(data json.RawMessage) error {
	var r vethRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	if err := checkNs(r.Netns); err != nil {
		return err
	}
	if !nsExists(r.Netns) || !linkRE.MatchString(r.Link) {
		return nil
	}
	b, err := trustedBins()
	if err != nil {
		return err
	}
	if _, err := b.run(context.Background(), b.ip, "-n", r.Netns, "link", "show", r.Link); err != nil {
		return nil // gone already
	}
	if out, err := b.run(context.Background(), b.ip, "-n", r.Netns, "link", "del", r.Link); err != nil {
		return fmt.Errorf("ip -n %s link del %s: %v: %s", r.Netns, r.Link, err, out)
	}
	return nil
}

func undoRules(data json.RawMessage) error {
	var r rulesRecord
	if err := json.Unmarshal(data, &r); err != nil {
		return err
	}
	if err := checkNs(r.Netns); err != nil {
		return err
	}
	if !nsExists(r.Netns) {
		return nil
	}
	b, err := trustedBins()
	if err != nil {
		return err
	}
	var errs []error
	for _, rule := range r.Rules {
		if len(rule) < 2 || (rule[0] != "INPUT" && rule[0] != "OUTPUT") {
			errs = append(errs, fmt.Errorf("iptables rule %q is not a lab's", rule))
			continue
		}
		// -C first: a rule gone already (Heal ran) is done.
		if _, err := b.run(context.Background(), b.ip, append([]string{"netns", "exec", r.Netns, b.iptables, "-w", "5", "-C"}, rule...)...); err != nil {
			continue
		}
		if out, err := b.run(context.Background(), b.ip, append([]string{"netns", "exec", r.Netns, b.iptables, "-w", "5", "-D"}, rule...)...); err != nil {
			errs = append(errs, fmt.Errorf("iptables -D %s in %s: %v: %s", strings.Join(rule, " "), r.Netns, err, out))
		}
	}
	return errors.Join(errs...)
}
