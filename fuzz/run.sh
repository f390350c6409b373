#!/usr/bin/env bash
# Runs the protocol fuzzers (docs/fuzzing.md); `scripts/dev fuzz` calls this.
#
#   fuzz/run.sh [frames|message|command|all] [--time SECONDS] [--runs N] [--minimize]
#
# Each target stops after SECONDS (default 60) or N executions, whichever comes first.
# Targets run one after another, never at once, at the lowest CPU priority. New inputs go to
# fuzz/work/<target> (not committed); the committed corpus fuzz/corpus/<target> is read as a
# seed. --minimize merges the work corpus into the committed one and minimises it (cargo fuzz
# cmin), which is what `cargo test --test fuzz_corpus` replays. Crashes land in
# fuzz/artifacts/<target>/; replay one with `cargo fuzz run -s none -a --fuzz-dir fuzz <target> <file>`.
#
# Only the stable toolchain is needed: RUSTC_BOOTSTRAP=1 lets it take libFuzzer's -Z flags, and
# `-s none` skips the sanitizer (the code under test is safe Rust; the fuzzer is after panics,
# aborts and allocations that a hostile peer could cause).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

targets=()
time=60
runs=""
minimize=0
while [ $# -gt 0 ]; do
    case "$1" in
        --time) time="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --minimize) minimize=1; shift ;;
        all) targets=(frames message command); shift ;;
        frames|message|command) targets+=("$1"); shift ;;
        *) echo "usage: scripts/dev fuzz [frames|message|command|all] [--time SECONDS] [--runs N] [--minimize]" >&2; exit 2 ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=(frames message command)

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
export RUSTC_BOOTSTRAP=1
fuzz=(cargo fuzz run -s none -a --fuzz-dir fuzz)

for t in "${targets[@]}"; do
    mkdir -p "fuzz/work/$t"
    limit=(-max_total_time="$time")
    [ -z "$runs" ] || limit+=(-runs="$runs")
    echo "== $t: ${limit[*]}"
    nice -n 19 "${fuzz[@]}" "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
        "${limit[@]}" -max_len=4096 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
    if [ "$minimize" = 1 ]; then
        cp -n "fuzz/work/$t"/* "fuzz/corpus/$t"/ 2>/dev/null || true
        nice -n 19 cargo fuzz cmin -s none -a --fuzz-dir fuzz "$t" "fuzz/corpus/$t"
        du -sh "fuzz/corpus/$t"
    fi
done
