package host

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// ListenSocket is a listening TCP socket as the kernel reports it.
type ListenSocket struct {
	Addr  string `json:"addr"` // 0.0.0.0, ::, 127.0.0.1 ...
	Port  int    `json:"port"`
	Inode uint64 `json:"inode"`
	// Backlog is sk_max_ack_backlog: the backlog the server passed to
	// listen(2), already capped by net.core.somaxconn at that moment.
	Backlog int `json:"backlog"`
}

// ListenSockets lists the listening TCP sockets (IPv4 and IPv6) through the
// sock_diag netlink interface, as `ss -lnt` does. The kernel filters on the
// LISTEN state, so unlike /proc/net/tcp it does not walk every connection
// (1.5 ms per family on an idle 24 GiB host), and it reports the accept
// backlog, which /proc/net/tcp shows as 0. No privilege is needed.
func (h *Host) ListenSockets() ([]ListenSocket, error) {
	b, err := h.Probe("sock_diag:tcp_listen", func() ([]byte, error) {
		var out []ListenSocket
		for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
			socks, err := sockDiagListen(fam)
			if err != nil {
				if fam == unix.AF_INET6 && errors.Is(err, unix.ENOENT) {
					continue // IPv6 disabled
				}
				return nil, err
			}
			out = append(out, socks...)
		}
		return marshal(out)
	})
	if err != nil {
		return nil, err
	}
	var out []ListenSocket
	return out, unmarshal(b, &out)
}

const (
	inetDiagReqLen = 56 // struct inet_diag_req_v2
	inetDiagMsgLen = 72 // struct inet_diag_msg
	tcpListen      = 10 // TCP_LISTEN
)

// sockDiagListen dumps the listening TCP sockets of one address family.
func sockDiagListen(family uint8) (out []ListenSocket, err error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("sock_diag socket: %w", err)
	}
	defer unix.Close(fd)
	req := make([]byte, unix.SizeofNlMsghdr+inetDiagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	ne.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	ne.PutUint32(req[8:], 1) // sequence
	body := req[unix.SizeofNlMsghdr:]
	body[0] = family
	body[1] = unix.IPPROTO_TCP
	ne.PutUint32(body[4:], 1<<tcpListen)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, fmt.Errorf("sock_diag send: %w", err)
	}
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, fmt.Errorf("sock_diag receive: %w", err)
		}
		for off := 0; off+unix.SizeofNlMsghdr <= n; {
			mlen := int(ne.Uint32(buf[off:]))
			typ := ne.Uint16(buf[off+4:])
			if mlen < unix.SizeofNlMsghdr || off+mlen > n {
				return nil, errors.New("sock_diag: malformed netlink message")
			}
			data := buf[off+unix.SizeofNlMsghdr : off+mlen]
			off += (mlen + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
			switch typ {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				if len(data) >= 4 {
					if e := int32(ne.Uint32(data)); e != 0 {
						return nil, unix.Errno(-e)
					}
				}
				return out, nil
			case unix.SOCK_DIAG_BY_FAMILY:
				if len(data) < inetDiagMsgLen || data[1] != tcpListen {
					continue
				}
				// struct inet_diag_msg: id.idiag_sport (big-endian) at 4,
				// id.idiag_src at 8 (16 bytes; IPv4 uses the first 4),
				// idiag_wqueue (sk_max_ack_backlog when listening) at 60,
				// idiag_inode at 68.
				var addr netip.Addr
				if family == unix.AF_INET {
					addr = netip.AddrFrom4([4]byte(data[8:12]))
				} else {
					addr = netip.AddrFrom16([16]byte(data[8:24]))
				}
				out = append(out, ListenSocket{
					Addr:    addr.String(),
					Port:    int(binary.BigEndian.Uint16(data[4:6])),
					Inode:   uint64(ne.Uint32(data[68:])),
					Backlog: int(ne.Uint32(data[60:])),
				})
			}
		}
	}
}
