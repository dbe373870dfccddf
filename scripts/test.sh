#!/usr/bin/env bash
# The README's test command: sets up everything the tests need on a fresh machine, then runs them
# all: the Rust workspace (which runs the TypeScript client's, the playground's, the front-end
# clients', the browser and the Python suites against its own `weft` binary), the examples, and
# schemathesis against /openapi.json.
#
# Set up here: the PostgreSQL test database, the Node packages (clients/typescript,
# clients/frontends, the reference MCP server, Deno and Bun from npm), Chromium (Debian's
# package), the Python client's environment (clients/python/.venv, from PyPI), and Arize Phoenix
# (target/phoenix-venv, from PyPI: the OpenTelemetry receiver of the OTLP test).
#
# A test whose real component is missing fails the run, unless the caller opts out of that
# component: WEFT_ALLOW_SKIP=postgres,browser (any of postgres, node, browser, runtimes, mcp,
# python, phoenix, tmpfs; or all). The summary at the end names everything that was skipped.
#
# Usage: bash scripts/test.sh [arguments for `cargo test --workspace`, e.g. -- --test-threads=2]
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

allowed() { [[ ",${WEFT_ALLOW_SKIP:-}," == *",$1,"* || ",${WEFT_ALLOW_SKIP:-}," == *",all,"* ]]; }

SKIP_LOG="$(mktemp)"
export WEFT_SKIP_LOG="$SKIP_LOG"
trap 'rm -f "$SKIP_LOG"' EXIT

# A component whose set-up failed: the run stops here, unless the caller allowed it to be
# skipped (its tests then record their own skips).
unavailable() {
  local component="$1" why="$2"
  if allowed "$component"; then
    echo "!!! $component is not available ($why); its tests will skip (WEFT_ALLOW_SKIP)" >&2
    printf '%s\t%s\t%s\n' "$component" "set-up" "$why" >> "$SKIP_LOG"
  else
    echo "error: $component is not available: $why" >&2
    echo "(set WEFT_ALLOW_SKIP=$component to run the rest without it)" >&2
    exit 1
  fi
}

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo "$@"; else return 1; fi
}

echo "== PostgreSQL: the test database"
if postgres_env="$(bash .ci/postgres.sh)"; then
  eval "$postgres_env"
  echo "WEFT_TEST_POSTGRES_URL=$WEFT_TEST_POSTGRES_URL"
else
  unavailable postgres "no PostgreSQL server could be started on 127.0.0.1:5432"
fi

echo "== Chromium (Debian's package) for the browser tests"
if ! command -v chromium >/dev/null 2>&1 && [ -z "${CHROMIUM:-}" ]; then
  export DEBIAN_FRONTEND=noninteractive
  { as_root apt-get update -qq && as_root apt-get install -y -qq chromium; } ||
    unavailable browser "chromium is not installed and apt-get could not install it"
fi

echo "== Node packages"
node_ok=true
if ! command -v node >/dev/null 2>&1 || [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ]; then
  node_ok=false
  unavailable node "Node.js 20 or newer is not installed"
fi
if $node_ok; then
  for dir in clients/typescript clients/frontends crates/weft-tools/tests/reference; do
    echo "-- npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error) ||
      unavailable "$([ "$dir" = crates/weft-tools/tests/reference ] && echo mcp || echo node)" "npm ci failed in $dir"
  done
  # Deno and Bun for the client's runtime tests, from npm (not in the lock file: their packages'
  # per-platform optional dependencies keep `npm ci` from accepting them there).
  (cd clients/typescript && npm install --no-save --no-audit --no-fund --loglevel=error deno@2.9.6 bun@1.4.5) ||
    unavailable runtimes "npm could not install deno and bun"
fi

echo "== the Python client's environment (clients/python/.venv)"
bash clients/python/scripts/setup.sh || unavailable python "the Python client's environment could not be made"

echo "== Arize Phoenix (target/phoenix-venv), the OTLP receiver of the OpenTelemetry test"
bash .ci/phoenix.sh || unavailable phoenix "Arize Phoenix could not be installed from PyPI"

echo "== cargo test --workspace"
cargo test --workspace "$@"

echo "== examples (each checks itself)"
for example in readme local_tool remote_tool approval client_tool game24; do
  echo "-- $example"
  cargo run -q -p weft-examples --example "$example" > /dev/null
done

echo "== schemathesis against /openapi.json (no 5xx, no response outside the schema)"
bash .ci/schemathesis.sh 100

echo
echo "== summary"
if [ -s "$SKIP_LOG" ]; then
  echo "every suite passed, but these were SKIPPED (WEFT_ALLOW_SKIP=${WEFT_ALLOW_SKIP:-}):"
  sort -u "$SKIP_LOG" | awk -F'\t' '{ printf "  %-9s %s: %s\n", $1, $2, $3 }'
else
  echo "every suite passed; nothing was skipped (Rust workspace with Postgres, TypeScript client"
  echo "and playground in Node, Deno, Bun and Chromium, front-end clients in Chromium, reference MCP"
  echo "server, Python client, OpenTelemetry to Phoenix, examples, schemathesis)"
fi
