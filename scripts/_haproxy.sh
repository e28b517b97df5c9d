# Sourced by scripts/test and scripts/cluster: `ensure_haproxy` makes sure Debian's haproxy is
# there (the balancer of the multi-node tests, tests/multinode, and of scripts/cluster). When it
# is missing it is installed with apt-get if this is root and apt-get exists; otherwise it stops
# with the one command to run (exit status 1).
ensure_haproxy() {
  if command -v haproxy >/dev/null 2>&1; then
    return 0
  fi
  local install="apt-get install -y haproxy"
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing Debian's haproxy (multi-node tests)" >&2
    if apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >&2 \
      && command -v haproxy >/dev/null 2>&1; then
      return 0
    fi
    echo "error: installing haproxy failed; run: $install" >&2
    return 1
  fi
  echo "error: haproxy is missing (the multi-node tests need Debian's haproxy); run: sudo $install" >&2
  return 1
}
