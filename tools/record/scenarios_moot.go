package main

// Settings that another setting makes moot, recorded on both sides.
func init() {
	register(Scenario{
		Name:  "net-syncookies-off",
		Note:  "net.ipv4.tcp_syncookies 0 with the default tcp_max_syn_backlog: without SYN cookies a full SYN queue drops connection attempts, so the backlog size matters (with cookies on, as on every other recording, it is moot)",
		Setup: sysctlSetup("net.ipv4.tcp_syncookies", "0"),
	})
}
