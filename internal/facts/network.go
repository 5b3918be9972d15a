package facts

// Kernel parameters the network checks judge. The listening sockets
// themselves are engine.Instance.Listen.
func init() {
	wantSysctl(
		"net.core.somaxconn", "net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_syncookies",
		"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes",
		"net.ipv4.tcp_fin_timeout", "net.ipv4.ip_local_port_range", "net.ipv4.ip_local_reserved_ports",
	)
}
