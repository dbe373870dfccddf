#!/usr/bin/env bash
# Arize Phoenix (from PyPI, pinned), the OpenTelemetry receiver weft-cli's `otel` test sends
# spans to: a virtual environment in target/phoenix-venv (made when missing or of another
# version). Usage: bash .ci/phoenix.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=20.26.1
VENV=target/phoenix-venv
if [ -x "$VENV/bin/phoenix" ] && "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('arize-phoenix') != '$VERSION')"; then
  exit 0
fi
rm -rf "$VENV"
python3 -m venv "$VENV"
"$VENV/bin/pip" install --quiet --disable-pip-version-check "arize-phoenix==$VERSION"
