#!/usr/bin/env bash
# Runs the Python client's tests against a real `weft serve`.
#
#   clients/python/scripts/test.sh [PYTEST ARGS…]
#
# WEFT_BIN names the weft binary; without it the script builds one (`cargo build -p weft-cli`
# at the repository's root) and uses target/debug/weft. A WEFT_BIN that is not an executable
# file is an error. The virtual environment is clients/python/.venv (scripts/setup.sh makes it
# when missing, with `pip install -e '.[test]'`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
repo="$(cd "$here/../.." && pwd)"

if [[ -n "${WEFT_BIN:-}" ]]; then
  if [[ ! -f "$WEFT_BIN" || ! -x "$WEFT_BIN" ]]; then
    echo "test.sh: WEFT_BIN=$WEFT_BIN is not an executable file" >&2
    exit 2
  fi
else
  echo "test.sh: WEFT_BIN is not set: building weft (cargo build -p weft-cli)" >&2
  if ! (cd "$repo" && cargo build -p weft-cli); then
    echo "test.sh: cargo build -p weft-cli failed; build weft or set WEFT_BIN" >&2
    exit 2
  fi
  WEFT_BIN="${CARGO_TARGET_DIR:-$repo/target}/debug/weft"
  if [[ ! -x "$WEFT_BIN" ]]; then
    echo "test.sh: no weft binary at $WEFT_BIN after the build" >&2
    exit 2
  fi
fi
WEFT_BIN="$(cd "$(dirname "$WEFT_BIN")" && pwd)/$(basename "$WEFT_BIN")"
export WEFT_BIN

bash "$here/scripts/setup.sh"

cd "$here"
exec "$here/.venv/bin/python" -m pytest "$@"
