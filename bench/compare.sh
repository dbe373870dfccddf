#!/usr/bin/env bash
# Weft side by side with pi-agent-core (issue 11): builds the release `weft` binary and the
# `compare` bench, then runs every workload (or those given: w1 w2 w3 w4).
#
#   WEFT_PI_BENCH=/tmp/pi15 bench/compare.sh           # with pi 1.5.2 (npm ci of ../shared/bench/pi15 there)
#   bench/compare.sh w1 w3                              # Weft only, two workloads
#
# Knobs: WEFT_BENCH_RUNS (runs per measure, default 3), WEFT_BENCH_TEXT_DELTAS (W1, default
# 1,000,000), WEFT_BENCH_W2_DELTAS (W2, default 10,000), WEFT_COMPARE_CG_DELTAS (W1 under
# callgrind, default 200,000), WEFT_COMPARE_CALLGRIND=0 (skip callgrind).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release -p weft-cli
exec cargo bench -p weft-agent --bench compare -- "$@"
