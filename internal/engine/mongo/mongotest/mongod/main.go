// Command mongod is a stand-in for MongoDB's server, used by dbhost's tests
// and fixture recordings on hosts where MongoDB cannot be installed. It is a
// real process named mongod that does what dbhost observes of a mongod and
// nothing more: `--version` prints the real output format of the version it
// was built for (-ldflags "-X main.version=8.0.4"); otherwise it reads its
// --config YAML (and the usual overrides), refuses a missing dbPath like
// mongod does, writes mongod.lock, storage.bson and a log line, listens on
// the configured addresses, port and Unix socket with the configured
// backlog, closes every connection it accepts, and exits on SIGTERM.
// It speaks no MongoDB protocol and stores no data.
package main

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"
)

// version is set at build time.
var version = "8.0.4"

// builds holds the Build Info of real releases (gitVersion, OpenSSL,
// allocator, distribution) as `mongod --version` prints them.
var builds = map[string][4]string{
	"8.0.4":  {"bc35ab4305d9920d9d0491c1c9ef9b72383d31f9", "OpenSSL 3.0.15 3 Sep 2024", "tcmalloc-google", "debian12"},
	"6.0.10": {"8e4b5670df9b9fe814e57cb5f3f8ee9407237b5a", "OpenSSL 3.0.2 15 Mar 2022", "tcmalloc", "ubuntu2204"},
	"4.0.28": {"af1a9dc12adcfa83cc19571cb3faba26eeddac92", "OpenSSL 1.1.1n  15 Mar 2022", "tcmalloc", "debian10"},
}

func printVersion() {
	b, ok := builds[version]
	if !ok {
		b = [4]string{"0000000000000000000000000000000000000000", "OpenSSL 3.0.15 3 Sep 2024", "tcmalloc", "debian12"}
	}
	if major, _ := strconv.Atoi(strings.Split(version, ".")[0]); major < 4 || strings.HasPrefix(version, "4.0.") || strings.HasPrefix(version, "4.2.") {
		// Before 4.4 the build info was printed as plain lines.
		fmt.Printf(`db version v%s
git version: %s
OpenSSL version: %s
allocator: %s
modules: none
build environment:
    distmod: %s
    distarch: x86_64
    target_arch: x86_64
`, version, b[0], b[1], b[2], b[3])
		return
	}
	fmt.Printf(`db version v%s
Build Info: {
    "version": "%s",
    "gitVersion": "%s",
    "openSSLVersion": "%s",
    "modules": [],
    "allocator": "%s",
    "environment": {
        "distmod": "%s",
        "distarch": "x86_64",
        "target_arch": "x86_64"
    }
}
`, version, version, b[0], b[1], b[2], b[3])
}

type config struct {
	dbPath, engine, logPath, sockPrefix string
	bindIP                              []string
	bindAll, ipv6, noSocket             bool
	port, backlog                       int
}

func main() {
	args := os.Args[1:]
	for _, a := range args {
		if a == "--version" || a == "-version" {
			printVersion()
			return
		}
	}
	c := config{dbPath: "/data/db", engine: "wiredTiger", port: 27017, bindIP: []string{"localhost"}, sockPrefix: "/tmp", backlog: 4096}
	if err := parseArgs(args, &c); err != nil {
		fail(err)
	}
	if st, err := os.Stat(c.dbPath); err != nil || !st.IsDir() {
		fail(fmt.Errorf("NonExistentPath: Data directory %s not found", c.dbPath))
	}
	must(os.WriteFile(filepath.Join(c.dbPath, "storage.bson"), storageBSON(c.engine), 0o600))
	var lns []net.Listener
	for _, a := range addresses(c) {
		ln, err := listen(a, c.port, c.backlog)
		if err != nil {
			fail(fmt.Errorf("failed to set up listener: %s:%d: %v", a, c.port, err))
		}
		lns = append(lns, ln)
	}
	sock := ""
	if !c.noSocket {
		sock = filepath.Join(c.sockPrefix, fmt.Sprintf("mongodb-%d.sock", c.port))
		os.Remove(sock)
		ln, err := net.Listen("unix", sock)
		if err != nil {
			fail(err)
		}
		os.Chmod(sock, 0o700)
		lns = append(lns, ln)
	}
	// The lock file is written last: it tells the test harness the
	// sockets are ready.
	lock := filepath.Join(c.dbPath, "mongod.lock")
	must(os.WriteFile(lock, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o600))
	logLine(c, "Waiting for connections")
	for _, ln := range lns {
		go func() {
			for {
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	for _, ln := range lns {
		ln.Close()
	}
	if sock != "" {
		os.Remove(sock)
	}
	os.Truncate(lock, 0) // mongod empties its lock file on a clean shutdown
	logLine(c, "shutting down with code:0")
}

func parseArgs(args []string, c *config) error {
	val := func(i *int, a string) string {
		if _, v, ok := strings.Cut(a, "="); ok {
			return v
		}
		if *i+1 < len(args) {
			*i++
			return args[*i]
		}
		return ""
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case a == "-f" || name == "config":
			if err := readConfig(val(&i, a), c); err != nil {
				return err
			}
		case name == "dbpath":
			c.dbPath = val(&i, a)
		case name == "port":
			c.port, _ = strconv.Atoi(val(&i, a))
		case name == "bind_ip":
			c.bindIP = strings.Split(val(&i, a), ",")
		case name == "bind_ip_all":
			c.bindAll = true
		case name == "storageEngine":
			c.engine = val(&i, a)
		case name == "logpath":
			c.logPath = val(&i, a)
		}
	}
	return nil
}

func readConfig(file string, c *config) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var y struct {
		Storage struct {
			DBPath string `yaml:"dbPath"`
			Engine string `yaml:"engine"`
		} `yaml:"storage"`
		SystemLog struct {
			Path string `yaml:"path"`
		} `yaml:"systemLog"`
		Net struct {
			Port           int    `yaml:"port"`
			BindIP         string `yaml:"bindIp"`
			BindIPAll      bool   `yaml:"bindIpAll"`
			IPv6           bool   `yaml:"ipv6"`
			ListenBacklog  int    `yaml:"listenBacklog"`
			UnixDomainSock struct {
				Enabled    *bool  `yaml:"enabled"`
				PathPrefix string `yaml:"pathPrefix"`
			} `yaml:"unixDomainSocket"`
		} `yaml:"net"`
	}
	if err := yaml.Unmarshal(b, &y); err != nil {
		return fmt.Errorf("error parsing YAML config file: %v", err)
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&c.dbPath, y.Storage.DBPath)
	set(&c.engine, y.Storage.Engine)
	set(&c.logPath, y.SystemLog.Path)
	set(&c.sockPrefix, y.Net.UnixDomainSock.PathPrefix)
	if y.Net.Port != 0 {
		c.port = y.Net.Port
	}
	if y.Net.BindIP != "" {
		c.bindIP = strings.Split(y.Net.BindIP, ",")
	}
	if y.Net.ListenBacklog > 0 {
		c.backlog = y.Net.ListenBacklog
	}
	c.bindAll = c.bindAll || y.Net.BindIPAll
	c.ipv6 = y.Net.IPv6
	c.noSocket = y.Net.UnixDomainSock.Enabled != nil && !*y.Net.UnixDomainSock.Enabled
	return nil
}

func addresses(c config) []string {
	if c.bindAll {
		if c.ipv6 {
			return []string{"0.0.0.0", "::"}
		}
		return []string{"0.0.0.0"}
	}
	var out []string
	for _, a := range c.bindIP {
		a = strings.TrimSpace(a)
		if a == "localhost" {
			a = "127.0.0.1"
		}
		if a != "" {
			out = append(out, a)
		}
	}
	return out
}

// listen opens a listening TCP socket with an explicit backlog (mongod's
// net.listenBacklog), IPv6 sockets v6-only like mongod's.
func listen(addr string, port, backlog int) (net.Listener, error) {
	ip := net.ParseIP(addr)
	if ip == nil {
		return nil, fmt.Errorf("bad address %q", addr)
	}
	var fd int
	var err error
	var sa syscall.Sockaddr
	if v4 := ip.To4(); v4 != nil {
		fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		s := &syscall.SockaddrInet4{Port: port}
		copy(s.Addr[:], v4)
		sa = s
	} else {
		fd, err = syscall.Socket(syscall.AF_INET6, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err == nil {
			syscall.SetsockoptInt(fd, syscall.IPPROTO_IPV6, syscall.IPV6_V6ONLY, 1)
		}
		s := &syscall.SockaddrInet6{Port: port}
		copy(s.Addr[:], ip.To16())
		sa = s
	}
	if err != nil {
		return nil, err
	}
	syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	if err := syscall.Bind(fd, sa); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	f := os.NewFile(uintptr(fd), "listener")
	defer f.Close()
	return net.FileListener(f)
}

// storageBSON encodes {storage: {engine: E, options: {directoryPerDB:
// false, directoryForIndexes: false}}}, what mongod writes on first start.
func storageBSON(engine string) []byte {
	doc := func(elems ...[]byte) []byte {
		var body []byte
		for _, e := range elems {
			body = append(body, e...)
		}
		out := binary.LittleEndian.AppendUint32(nil, uint32(len(body)+5))
		return append(append(out, body...), 0)
	}
	str := func(k, v string) []byte {
		out := append(append([]byte{0x02}, k...), 0)
		out = binary.LittleEndian.AppendUint32(out, uint32(len(v)+1))
		return append(append(out, v...), 0)
	}
	boolean := func(k string) []byte { return append(append([]byte{0x08}, k...), 0, 0) }
	sub := func(k string, d []byte) []byte { return append(append(append([]byte{0x03}, k...), 0), d...) }
	return doc(sub("storage", doc(str("engine", engine), sub("options", doc(boolean("directoryPerDB"), boolean("directoryForIndexes"))))))
}

// logLine appends a line in mongod's structured log format.
func logLine(c config, msg string) {
	if c.logPath == "" {
		return
	}
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, `{"t":{"$date":"%s"},"s":"I",  "c":"NETWORK",  "id":23016,   "ctx":"listener","msg":%q}`+"\n",
		time.Now().UTC().Format("2006-01-02T15:04:05.000+00:00"), msg)
}

func must(err error) {
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "mongod: %v\n", err)
	os.Exit(100) // mongod's exit code for an uncaught startup error
}
