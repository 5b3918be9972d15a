package host

import (
	"encoding/binary"
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ListenBacklogs returns the accept-queue limit of every listening TCP
// socket, by socket inode. The kernel keeps it as sk_max_ack_backlog: the
// backlog the server passed to listen(2), already capped by
// net.core.somaxconn at that moment. /proc/net/tcp does not show it (its
// tx_queue column is 0 for listening sockets); the sock_diag netlink
// interface does, as `ss -lnt` prints in Send-Q. No privilege is needed.
func (h *Host) ListenBacklogs() (map[uint64]int, error) {
	b, err := h.Probe("sock_diag:tcp_listen_backlog", func() ([]byte, error) {
		m := map[uint64]int{}
		for _, fam := range []uint8{unix.AF_INET, unix.AF_INET6} {
			if err := sockDiagListen(fam, m); err != nil {
				if fam == unix.AF_INET6 && errors.Is(err, unix.ENOENT) {
					continue // IPv6 disabled
				}
				return nil, err
			}
		}
		return marshal(m)
	})
	if err != nil {
		return nil, err
	}
	var out map[uint64]int
	return out, unmarshal(b, &out)
}

const (
	inetDiagReqLen = 56 // struct inet_diag_req_v2
	inetDiagMsgLen = 72 // struct inet_diag_msg
	tcpListen      = 10 // TCP_LISTEN
)

// sockDiagListen dumps the listening TCP sockets of one address family.
func sockDiagListen(family uint8, out map[uint64]int) error {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return fmt.Errorf("sock_diag socket: %w", err)
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
		return fmt.Errorf("sock_diag send: %w", err)
	}
	buf := make([]byte, 64<<10)
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return fmt.Errorf("sock_diag receive: %w", err)
		}
		for off := 0; off+unix.SizeofNlMsghdr <= n; {
			mlen := int(ne.Uint32(buf[off:]))
			typ := ne.Uint16(buf[off+4:])
			if mlen < unix.SizeofNlMsghdr || off+mlen > n {
				return errors.New("sock_diag: malformed netlink message")
			}
			data := buf[off+unix.SizeofNlMsghdr : off+mlen]
			off += (mlen + unix.NLMSG_ALIGNTO - 1) &^ (unix.NLMSG_ALIGNTO - 1)
			switch typ {
			case unix.NLMSG_DONE:
				return nil
			case unix.NLMSG_ERROR:
				if len(data) >= 4 {
					if e := int32(ne.Uint32(data)); e != 0 {
						return unix.Errno(-e)
					}
				}
				return nil
			case unix.SOCK_DIAG_BY_FAMILY:
				if len(data) < inetDiagMsgLen || data[1] != tcpListen {
					continue
				}
				// idiag_wqueue (offset 60) is sk_max_ack_backlog for a
				// listening socket; idiag_inode is at offset 68.
				backlog := ne.Uint32(data[60:])
				inode := ne.Uint32(data[68:])
				out[uint64(inode)] = int(backlog)
			}
		}
	}
}
