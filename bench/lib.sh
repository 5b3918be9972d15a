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
