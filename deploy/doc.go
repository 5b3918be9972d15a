// Package deploy holds what runs dbhost serve in production, beside the
// binary: Prometheus rules (prometheus/), a Grafana dashboard (grafana/)
// and systemd units (systemd/); scripts/package-deb puts them in the
// Debian package. It has no code: its tests check those files with the
// tools that will read them (promtool, systemd-analyze, dpkg).
package deploy
