# Sourced by the scripts: creates and fills .venv when it is missing or pyproject.toml changed.
# Usage: source scripts/_venv.sh [extra,...]   ("" installs Drupe with no extras; default: dev)
# pip's output goes to .venv/pip-<extras>.log; the terminal gets a progress line
# (scripts/pip_progress.py), and the log's tail when pip fails.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1-dev}"
# The IM platform SDKs (drupe[channels]) are always installed by the scripts.
case ",$EXTRAS," in *,channels,*) ;; ,,) EXTRAS="channels" ;; *) EXTRAS="$EXTRAS,channels" ;; esac
PY="${DRUPE_PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "Drupe needs Python >= 3.11 (found $("$PY" --version 2>&1))." >&2
  exit 1
fi
NAME="$(echo "${EXTRAS:-core}" | tr ',' '-')"
STAMP="$VENV/.drupe-stamp-$NAME"
WANT="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "==> creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi

# drupe_pip LABEL LOG ARGS...: pip install with a progress line; returns pip's exit status.
drupe_pip() {
  local label="$1" log="$2"
  shift 2
  # pipefail (set above): the pipeline fails when pip does.
  if ! "$VENV/bin/python" -m pip install -v "$@" 2>&1 \
    | "$PY" "$ROOT/scripts/pip_progress.py" --log "$log" --label "$label"; then
    echo "!! pip failed; the end of $log:" >&2
    tail -n 25 "$log" >&2
    return 1
  fi
}

if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$WANT" ]]; then
  TARGET="$ROOT"
  [[ -n "$EXTRAS" ]] && TARGET="$ROOT[$EXTRAS]"
  echo "==> installing drupe${EXTRAS:+[$EXTRAS]} into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2 || true
  drupe_pip "drupe${EXTRAS:+[$EXTRAS]}" "$VENV/pip-$NAME.log" -e "$TARGET"
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
