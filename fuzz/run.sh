#!/usr/bin/env bash
# Fuzzes every target (or those named) for SECONDS each, one after the other, then minimises
# each corpus, and prints the executions and findings of each target.
#
#   fuzz/run.sh SECONDS [TARGET...]
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`); runs on stable Rust: libFuzzer's coverage
# instrumentation (SanitizerCoverage) needs no nightly flag, only a sanitizer would
# (`--sanitizer none`). Targets are built optimised with debug assertions and overflow checks.
# Limits per input: 10 s (a hang), 2 GiB of memory (an out-of-memory), 64 KiB of input.
# Findings are saved in fuzz/artifacts/TARGET/; the run exits 1 if there is any.
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:?usage: fuzz/run.sh SECONDS [TARGET...]}"
shift
if [ "$#" -gt 0 ]; then
  targets=("$@")
else
  targets=()
  for f in fuzz_targets/*.rs; do targets+=("$(basename "$f" .rs)"); done
fi
build=(--sanitizer none --debug-assertions)

bash seed.sh fuzz/seeds > /dev/null  # seed.sh works from the repository root
cargo fuzz build "${build[@]}"
mkdir -p logs
summary=logs/summary.txt
: > "$summary"
total=0
found=0
for t in "${targets[@]}"; do
  mkdir -p "corpus/$t" "regressions/$t" "artifacts/$t"
  # The seeds join the corpus (the minimisation below keeps those that add coverage).
  cp -n "seeds/$t"/* "corpus/$t/" 2>/dev/null || true
  cargo fuzz run "${build[@]}" "$t" "corpus/$t" "regressions/$t" -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="artifacts/$t/" > "logs/$t.log" 2>&1 || true
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "logs/$t.log" | awk '{ print $2 }' | tail -1)
  execs=${execs:-0}
  rate=$(grep -o 'stat::average_exec_per_sec: *[0-9]*' "logs/$t.log" | awk '{ print $2 }' | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "logs/$t.log" | tail -1 | awk '{ print $2 }')
  findings=$(find "artifacts/$t" -type f | wc -l)
  total=$((total + execs))
  found=$((found + findings))
  line=$(printf '%-18s %12s executions %8s/s  coverage %6s  findings %s' \
    "$t" "$execs" "${rate:-?}" "${cov:-?}" "$findings")
  echo "$line" | tee -a "$summary"
  find "artifacts/$t" -type f -printf '    %p\n' | tee -a "$summary"
done
# Minimise: the smallest set of inputs (greedy set cover) keeping the coverage, without inputs
# over 8 KiB, so the committed corpus stays small (CI replays it).
bin=target/x86_64-unknown-linux-gnu/release
for t in "${targets[@]}"; do
  rm -rf "logs/min-$t" && mkdir -p "logs/min-$t"
  if "$bin/$t" -set_cover_merge=1 -timeout=10 -rss_limit_mb=2048 "logs/min-$t" "corpus/$t" \
      > "logs/$t.cmin.log" 2>&1; then
    find "logs/min-$t" -type f -size +8k -delete
    rm -rf "corpus/$t" && mv "logs/min-$t" "corpus/$t"
  fi
done
echo "total: $total executions, $found findings; corpus $(du -s --apparent-size --block-size=1K corpus | cut -f1) KiB" | tee -a "$summary"
[ "$found" -eq 0 ]
