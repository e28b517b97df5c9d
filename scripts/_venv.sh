# Sourced by the scripts: creates and fills .venv when it is missing or pyproject.toml changed.
# Usage: source scripts/_venv.sh [extra,...]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
EXTRAS="${1:-dev}"
# The IM platform SDKs (drupe[channels]) are always installed by the scripts.
case ",$EXTRAS," in *,channels,*) ;; *) EXTRAS="$EXTRAS,channels" ;; esac
PY="${DRUPE_PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
  echo "Drupe needs Python >= 3.11 (found $("$PY" --version 2>&1))." >&2
  exit 1
fi
STAMP="$VENV/.drupe-stamp-$(echo "$EXTRAS" | tr ',' '-')"
WANT="$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
if [[ ! -x "$VENV/bin/python" ]]; then
  echo "==> creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
if [[ ! -f "$STAMP" || "$(cat "$STAMP")" != "$WANT" ]]; then
  echo "==> installing drupe[$EXTRAS] into $VENV" >&2
  "$VENV/bin/python" -m pip install -q --upgrade pip >&2 || true
  "$VENV/bin/python" -m pip install -q -e "$ROOT[$EXTRAS]" >&2
  echo "$WANT" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
