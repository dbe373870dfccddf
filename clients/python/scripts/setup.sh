#!/usr/bin/env bash
# Makes the Python client's test environment: clients/python/.venv (when missing) with the
# package installed editable and its pinned test tools (`pip install -e '.[test]'`, from PyPI).
# PYTHON picks the interpreter that makes it (default python3; 3.10 or later).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/.venv"
if [[ ! -x "$venv/bin/python" ]]; then
  python="${PYTHON:-python3}"
  if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup.sh: $python is missing or older than Python 3.10" >&2
    exit 2
  fi
  "$python" -m venv "$venv"
fi
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$here[test]"
