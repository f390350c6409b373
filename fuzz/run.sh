#!/usr/bin/env bash
# Runs the protocol and schema-decoding fuzzers (docs/fuzzing.md); `scripts/dev fuzz` calls this.
#
#   fuzz/run.sh [frames|message|command|schema|all] [--time SECONDS] [--runs N] [--minimize]
#               [--fork JOBS] [--no-trace-compares]
#
# Each target stops after SECONDS (default 60) or N executions, whichever comes first.
# --fork runs JOBS fuzzing processes at once (libFuzzer's fork mode, one per core) that share
# one corpus. --no-trace-compares builds without comparison tracing: about 40% more executions
# per second on the message target, at the cost of guidance towards magic values; use it to
# continue from a corpus that a traced run has built.
# Targets run one after another, never at once, at the lowest CPU priority. New inputs go to
# fuzz/work/<target> (not committed); the committed corpus fuzz/corpus/<target> is read as a
# seed. --minimize then replaces the committed corpus by the fewest inputs of both that cover
# every edge they cover, which is what `cargo test --test fuzz_corpus` replays. Crashes land in
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
fork=""
build=()
while [ $# -gt 0 ]; do
    case "$1" in
        --time) time="$2"; shift 2 ;;
        --runs) runs="$2"; shift 2 ;;
        --minimize) minimize=1; shift ;;
        --fork) fork="$2"; shift 2 ;;
        --no-trace-compares) build+=(--no-trace-compares); shift ;;
        all) targets=(frames message command schema); shift ;;
        frames|message|command|schema) targets+=("$1"); shift ;;
        *) echo "usage: scripts/dev fuzz [frames|message|command|schema|all] [--time SECONDS] [--runs N] [--minimize] [--fork JOBS] [--no-trace-compares]" >&2; exit 2 ;;
    esac
done
[ ${#targets[@]} -gt 0 ] || targets=(frames message command schema)

command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz
export RUSTC_BOOTSTRAP=1
# Keep freed memory in the heap: glibc otherwise maps and unmaps every buffer over 128 KiB,
# and the page faults cost the message target a fifth of its executions.
export GLIBC_TUNABLES=glibc.malloc.mmap_threshold=33554432:glibc.malloc.trim_threshold=268435456
fuzz=(cargo fuzz run -s none -a "${build[@]}" --fuzz-dir fuzz)

for t in "${targets[@]}"; do
    mkdir -p "fuzz/work/$t"
    limit=(-max_total_time="$time")
    [ -z "$runs" ] || limit+=(-runs="$runs")
    [ -z "$fork" ] || limit+=(-fork="$fork")
    echo "== $t: ${limit[*]}"
    nice -n 19 "${fuzz[@]}" "$t" "fuzz/work/$t" "fuzz/corpus/$t" -- \
        "${limit[@]}" -max_len=4096 -rss_limit_mb=2048 -timeout=10 -print_final_stats=1
    if [ "$minimize" = 1 ]; then
        # Keep the fewest inputs that cover every edge (-use_counters=0: hit counts would keep
        # thousands more), so the committed corpora stay small enough to replay in cargo test.
        rm -rf "fuzz/work/$t.min" && mkdir -p "fuzz/work/$t.min"
        nice -n 19 "${fuzz[@]}" "$t" "fuzz/work/$t.min" "fuzz/corpus/$t" "fuzz/work/$t" -- \
            -merge=1 -use_counters=0 -rss_limit_mb=2048 -timeout=10
        rm -rf "fuzz/corpus/$t" && mv "fuzz/work/$t.min" "fuzz/corpus/$t"
        echo "fuzz/corpus/$t: $(ls "fuzz/corpus/$t" | wc -l) files, $(du -sh --apparent-size "fuzz/corpus/$t" | cut -f1)"
    fi
done
