# Shared by the bench scripts, which source it after changing to the
# repository root.

# need_root stops the script unless it runs as root: the tools compared
# read state only root can.
need_root() {
  [ "$(id -u)" -eq 0 ] || { echo "$(basename "$0"): run as root" >&2; exit 2; }
}

# install_packages installs distribution packages quietly; given none, it
# does nothing.
install_packages() {
  [ $# -eq 0 ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# free_port prints a TCP port free on loopback now.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# median prints the median of the numbers on its input, one a line.
median() { sort -g | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else printf "%.3f\n", (a[NR/2]+a[NR/2+1])/2}'; }
