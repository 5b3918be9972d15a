package engine

import (
	"net"
	"testing"
)

// Which socket accepts a connection: an exact bind beats a wildcard, a
// wildcard covers its own family (and "::" may take IPv4), every candidate
// must be the instance's, and a wildcard says nothing about another
// machine's address.
func TestReceiver(t *testing.T) {
	v := &tcpView{
		all: map[uint64]Listener{
			1: {Addr: "0.0.0.0", Port: 5432},
			2: {Addr: "::1", Port: 5432},
			3: {Addr: "127.0.0.1", Port: 3306},
			4: {Addr: "0.0.0.0", Port: 3306},
			5: {Addr: "::", Port: 6379},
			6: {Addr: "0.0.0.0", Port: 7000},
			7: {Addr: "0.0.0.0", Port: 7000},
		},
		mine: map[uint64]bool{1: true, 4: true, 5: true, 6: true},
	}
	for _, tc := range []struct {
		ip   string
		port int
		want receiver
	}{
		{"127.0.0.1", 5432, byInstance},
		{"::1", 5432, byOther},
		{"127.0.0.1", 3306, byOther},
		{"::1", 6379, byInstance},
		{"127.0.0.1", 6379, byInstance},
		{"127.0.0.1", 7000, byOther},
		{"192.0.2.1", 5432, byNobody},
		{"127.0.0.1", 9, byNobody},
	} {
		if got := v.receiver(net.ParseIP(tc.ip), tc.port); got != tc.want {
			t.Errorf("%s port %d: receiver %d, want %d", tc.ip, tc.port, got, tc.want)
		}
	}
}
