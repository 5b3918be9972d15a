// Command fakebin stands in for a database server binary that an
// unprivileged user controls. Installed under a server's name (redis-server,
// mongod, postgres, mariadbd), it logs every start — its uid and arguments —
// to log/exec.log beside it, answers --version like the real server, and
// otherwise runs until killed, so discovery sees a running "server".
//
// FAKE_MODE makes it more than a sleeper (dbhost runs commands with a
// clean environment, so its own runs never see it):
//
//	pg      listen on FAKE_SOCKET and FAKE_TCP, ask every client for a cleartext password
//	mysql   listen on FAKE_SOCKET and FAKE_TCP, send a handshake, then ask for a cleartext password
//	zombie  start FAKE_CHILD (which exits at once) and never reap it
//
// Whatever authentication data a client sends goes to log/harvest.log.
package main

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

var logDir string

func logTo(name, format string, args ...any) {
	f, err := os.OpenFile(filepath.Join(logDir, name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o666)
	if err != nil {
		return
	}
	fmt.Fprintf(f, format+"\n", args...)
	f.Close()
}

func main() {
	exe, _ := os.Executable()
	logDir = filepath.Join(filepath.Dir(exe), "log")
	logTo("exec.log", "uid=%d args=%q", os.Getuid(), os.Args)
	for _, a := range os.Args[1:] {
		if a == "--version" {
			version(filepath.Base(os.Args[0]))
			return
		}
	}
	switch os.Getenv("FAKE_MODE") {
	case "pg":
		serve(pgClient)
	case "mysql":
		serve(mysqlClient)
	case "zombie":
		cmd := exec.Command(os.Getenv("FAKE_CHILD"), "--version")
		cmd.Start() // never waited for: it stays a zombie
	}
	time.Sleep(time.Hour)
}

func version(name string) {
	switch name {
	case "redis-server":
		fmt.Println("Redis server v=9.9.1 sha=00000000:0 malloc=libc bits=64 build=0")
	case "mongod":
		fmt.Println("db version v9.9.2\nBuild Info: {}")
	case "postgres":
		fmt.Println("postgres (PostgreSQL) 99.3")
	case "mariadbd":
		fmt.Println("mariadbd  Ver 99.4.0-MariaDB for debian-linux-gnu on x86_64")
	}
}

// serve listens on FAKE_SOCKET and on each address of FAKE_TCP
// (comma-separated host:port), and logs "listening" once all are open.
func serve(handle func(net.Conn)) {
	var ls []net.Listener
	if sock := os.Getenv("FAKE_SOCKET"); sock != "" {
		l, err := net.Listen("unix", sock)
		if err != nil {
			logTo("exec.log", "listen: %v", err)
			return
		}
		os.Chmod(sock, 0o777)
		ls = append(ls, l)
	}
	for _, a := range strings.Split(os.Getenv("FAKE_TCP"), ",") {
		if a == "" {
			continue
		}
		l, err := net.Listen("tcp", a)
		if err != nil {
			logTo("exec.log", "listen: %v", err)
			return
		}
		ls = append(ls, l)
	}
	logTo("exec.log", "listening")
	for _, l := range ls {
		go accept(l, handle)
	}
	time.Sleep(time.Hour)
}

func accept(l net.Listener, handle func(net.Conn)) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			handle(c)
		}()
	}
}

// pgClient reads a StartupMessage, asks for a cleartext password and logs
// the PasswordMessage.
func pgClient(c net.Conn) {
	r := bufio.NewReader(c)
	var n int32
	if binary.Read(r, binary.BigEndian, &n) != nil || n < 8 || n > 10000 {
		return
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return
	}
	if binary.BigEndian.Uint32(body) == 80877103 { // SSLRequest: no
		c.Write([]byte("N"))
		pgClient(c)
		return
	}
	logTo("harvest.log", "pg startup %q", body[4:])
	c.Write([]byte{'R', 0, 0, 0, 8, 0, 0, 0, 3}) // AuthenticationCleartextPassword
	typ, err := r.ReadByte()
	if err != nil {
		return
	}
	if binary.Read(r, binary.BigEndian, &n) != nil || n < 4 || n > 10000 {
		return
	}
	msg := make([]byte, n-4)
	io.ReadFull(r, msg)
	logTo("harvest.log", "pg message %c %q", typ, msg)
}

// mysqlClient sends a protocol-10 handshake offering mysql_native_password,
// logs the client's reply, then switches to mysql_clear_password and logs
// that reply too.
func mysqlClient(c net.Conn) {
	salt := []byte("abcdefghijklmnopqrst")
	var p []byte
	p = append(p, 10)
	p = append(p, "99.4.0-MariaDB-fake\x00"...)
	p = append(p, 1, 0, 0, 0)
	p = append(p, salt[:8]...)
	p = append(p, 0)
	caps := uint32(0x0000_0200 | 0x0000_8000 | 0x0008_0000 | 0x0000_0008 | 0x0020_0000) // PROTOCOL_41, SECURE_CONNECTION, PLUGIN_AUTH, CONNECT_WITH_DB, PLUGIN_AUTH_LENENC
	p = append(p, byte(caps), byte(caps>>8))
	p = append(p, 33, 2, 0)
	p = append(p, byte(caps>>16), byte(caps>>24))
	p = append(p, 21)
	p = append(p, make([]byte, 10)...)
	p = append(p, salt[8:]...)
	p = append(p, 0)
	p = append(p, "mysql_native_password\x00"...)
	writePacket(c, 0, p)
	reply, seq, err := readPacket(c)
	if err != nil {
		return
	}
	logTo("harvest.log", "mysql handshake response %q hex %x", reply, reply)
	switchReq := append([]byte{0xfe}, "mysql_clear_password\x00"...)
	writePacket(c, seq+1, switchReq)
	if reply, _, err := readPacket(c); err == nil {
		logTo("harvest.log", "mysql auth switch response %q hex %x", reply, reply)
	}
}

func writePacket(c net.Conn, seq byte, p []byte) {
	c.Write(append([]byte{byte(len(p)), byte(len(p) >> 8), byte(len(p) >> 16), seq}, p...))
}

func readPacket(c net.Conn) ([]byte, byte, error) {
	var h [4]byte
	if _, err := io.ReadFull(c, h[:]); err != nil {
		return nil, 0, err
	}
	n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
	p := make([]byte, n)
	_, err := io.ReadFull(c, p)
	return p, h[3], err
}
