#!/usr/bin/env bash
# Weft side by side with the servers its users would pick instead, on the same streaming load in
# one run (issue 27), then the library against pi-agent-core, then the plots:
#
#   bench/peers.sh [OUT_DIR]            # default: bench/results/<UTC date>
#
# The servers: `weft serve` (release build; memory store, and SQLite, its default store),
# LangGraph's Agent Server (`langgraph dev`, in-memory runtime), the Vercel AI SDK (plain Node
# server) and the AI SDK with resumable-stream on Redis. The load: the harness in
# ../shared/bench/servers (beside this repository; its README says what it measures): S sessions,
# each one SSE client and one answer of DELTAS deltas of "abcd", paced at 20 per second by the
# server's fake model, CPU and memory read from /proc. All traffic stays on 127.0.0.1.
#
# It installs what the peers need once, into ~/.cache/weft-peerbench (PEERBENCH_WORK; outside
# the repository, whose workspace would claim the load generator): the harness's load generator,
# a Python venv with the pinned LangGraph packages, the AI SDK's npm packages, pi 1.5.2's npm
# packages. It writes into OUT_DIR:
#   servers.jsonl   one JSON line per run (the harness's format)
#   servers.md      the table, medians over the rounds (bench/plot.py)
#   pi.jsonl        W1–W4 against pi (the compare bench's rows)
#   *.svg           the plots (bench/plot.py)
#
# Knobs: SIZES (Weft's session counts, "30 100 1000"), PEER_SIZES (the peers', "30 100": they
# cannot keep up at 1,000), DELTAS (per session, 100), ROUNDS (1), WEFT_STORES ("memory sqlite";
# add `postgres` for a database on PEERBENCH_POSTGRES_URL's server, else WEFT_TEST_POSTGRES_URL's),
# PI=0 (skip pi), PEERBENCH (the harness, ../shared/bench/servers), PI_HARNESS
# (../shared/bench/pi15), PYTHON (python3.11). Runs never overlap: each server has the machine
# to itself with the load generator.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
HARNESS=${PEERBENCH:-$ROOT/../shared/bench/servers}
PI_HARNESS=${PI_HARNESS:-$ROOT/../shared/bench/pi15}
WORK=${PEERBENCH_WORK:-${XDG_CACHE_HOME:-$HOME/.cache}/weft-peerbench}
OUT=${1:-$ROOT/bench/results/$(date -u +%F)}
SIZES=${SIZES:-30 100 1000}
PEER_SIZES=${PEER_SIZES-30 100}
DELTAS=${DELTAS:-100}
ROUNDS=${ROUNDS:-1}
WEFT_STORES=${WEFT_STORES:-memory sqlite}
PI=${PI:-1}
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3

[ -x "$HARNESS/run.sh" ] || { echo "peers.sh: no harness at $HARNESS (set PEERBENCH)" >&2; exit 2; }
mkdir -p "$WORK" "$OUT"
OUT=$(cd "$OUT" && pwd)

echo "== installing the harness and the peers into $WORK (once)" >&2
# The harness is read-only where it is shared: it runs from a copy (installed packages stay).
cp -r "$HARNESS" "$WORK/"
SERVERS=$WORK/$(basename "$HARNESS")
(cd "$SERVERS/loadgen" && cargo build --release --quiet)
if [ ! -x "$SERVERS/lg-venv/bin/langgraph" ]; then
  "$PYTHON" -m venv "$SERVERS/lg-venv"
  "$SERVERS/lg-venv/bin/pip" install --quiet -r "$SERVERS/lg-requirements.lock"
fi
[ -d "$SERVERS/aisdk/node_modules" ] || (cd "$SERVERS/aisdk" && npm ci --no-audit --no-fund)
PEERS="langgraph aisdk aisdk-resumable"
if ! command -v redis-server >/dev/null; then
  echo "peers.sh: redis-server is not installed: aisdk-resumable is left out" >&2
  PEERS="langgraph aisdk"
fi

echo "== building weft (release)" >&2
(cd "$ROOT" && cargo build --release --quiet -p weft-cli)
export WEFT_BIN=$ROOT/target/release/weft

meta() {
  printf '{"date":"%s","commit":"%s","cpu":"%s","cores":%s,"rustc":"%s","node":"%s","python":"%s"}\n' \
    "$(date -u +%FT%TZ)" "$(git -C "$ROOT" rev-parse --short HEAD)" \
    "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')" "$(nproc)" \
    "$(rustc --version)" "$(node --version)" "$("$SERVERS/lg-venv/bin/python" --version)"
}
meta > "$OUT/machine.json"

# Postgres for Weft (WEFT_STORES with `postgres`): the harness knows memory and SQLite only, so
# `weft` is given through a wrapper that points its --store at a database made fresh per run.
PG_ADMIN=${PEERBENCH_POSTGRES_URL:-${WEFT_TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}}
PG_URL=${PG_ADMIN%/*}/weft_peerbench
cat >"$WORK/weft-postgres" <<WRAP
#!/usr/bin/env bash
# weft serve on Postgres ($PG_URL), for the harness's run.sh.
if [ "\${1:-}" = --version ]; then echo "\$("$ROOT/target/release/weft" --version) (postgres)"; exit; fi
args=(); prev=""
for a in "\$@"; do [ "\$prev" = --store ] && a="$PG_URL"; args+=("\$a"); prev=\$a; done
exec "$ROOT/target/release/weft" "\${args[@]}"
WRAP
chmod +x "$WORK/weft-postgres"

one() { # one SERVER S [ENV=VALUE...]
  local server=$1 s=$2
  shift 2
  echo "== $server S=$s $* ($(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  env "$@" "$SERVERS/run.sh" "$server" "$s" "$DELTAS" >>"$OUT/servers.jsonl" \
    || echo "   ($server S=$s: exit $?)" >&2
  sleep 2
}

: >"$OUT/servers.jsonl"
for round in $(seq 1 "$ROUNDS"); do
  echo "== round $round of $ROUNDS" >&2
  for s in $SIZES; do
    for store in $WEFT_STORES; do
      if [ "$store" = postgres ]; then
        psql -q "$PG_ADMIN" -c "DROP DATABASE IF EXISTS weft_peerbench" \
          -c "CREATE DATABASE weft_peerbench" >/dev/null
        one weft "$s" WEFT_STORE=memory WEFT_BIN="$WORK/weft-postgres"
      else
        one weft "$s" WEFT_STORE="$store"
      fi
    done
    if [[ " $PEER_SIZES " == *" $s "* ]]; then
      for peer in $PEERS; do
        one "$peer" "$s"
      done
    fi
  done
done

if [ "$PI" != 0 ] && [ -f "$PI_HARNESS/package.json" ]; then
  echo "== pi-agent-core 1.5.2 (W1–W4)" >&2
  cp -r "$PI_HARNESS" "$WORK/"
  PI_DIR=$WORK/$(basename "$PI_HARNESS")
  [ -d "$PI_DIR/node_modules" ] || (cd "$PI_DIR" && npm ci --no-audit --no-fund)
  # W2 at 100,000 deltas, as issue 27 measures it; no callgrind counts (not a comparison).
  WEFT_PI_BENCH=$PI_DIR WEFT_COMPARE_JSON=$OUT/pi.jsonl \
    WEFT_BENCH_W2_DELTAS=${WEFT_BENCH_W2_DELTAS:-100000} \
    WEFT_COMPARE_CALLGRIND=${WEFT_COMPARE_CALLGRIND:-0} "$ROOT/bench/compare.sh" >"$OUT/pi.md"
fi

"$PYTHON" "$ROOT/bench/plot.py" "$OUT"
echo "== done: $OUT" >&2
cat "$OUT/servers.md"
