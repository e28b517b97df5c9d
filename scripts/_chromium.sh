# Sourced by scripts/test: `ensure_chromium` makes sure Debian's chromium is there for the
# browser tests (tests/browser, Playwright with the system browser). When it is missing it is
# installed with apt-get if this is root and apt-get exists; otherwise it stops with the one
# command to run (exit status 1).
ensure_chromium() {
  if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    return 0
  fi
  local install="apt-get install -y chromium"
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null 2>&1; then
    echo "==> installing Debian's chromium (browser tests)" >&2
    if apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >&2 \
      && command -v chromium >/dev/null 2>&1; then
      return 0
    fi
    echo "error: installing chromium failed; run: $install" >&2
    return 1
  fi
  echo "error: chromium is missing (the browser tests need Debian's chromium); run: sudo $install" >&2
  return 1
}
