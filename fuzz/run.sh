#!/usr/bin/env bash
# fuzz/run.sh: every fuzz target for a fixed time, JOBS at once; a table of executions,
# corpus size and crashes to stdout and to fuzz/RESULTS.md (RECORD=0: not there).
#
# Usage: fuzz/run.sh                 (SECONDS_EACH=600: 10 minutes per target)
#        SECONDS_EACH=30 fuzz/run.sh cookies host
# Env:   SECONDS_EACH=600 JOBS=2 RECORD=1
# Needs: cargo install cargo-fuzz. libFuzzer needs nightly features: RUSTC_BOOTSTRAP=1 is
#        set for the cargo fuzz commands here and nowhere else (never for levee's build).
# A crash leaves its input in fuzz/artifacts/TARGET/; reproduce it with
#   RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET fuzz/artifacts/TARGET/crash-…
# and turn it into a regression test beside the parser it broke.
set -euo pipefail
cd "$(dirname "$0")"

SECONDS_EACH=${SECONDS_EACH:-600}
JOBS=${JOBS:-2}
command -v cargo-fuzz >/dev/null || { echo "missing: cargo-fuzz; install with: cargo install cargo-fuzz" >&2; exit 2; }

mapfile -t ALL < <(RUSTC_BOOTSTRAP=1 cargo fuzz list)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL[@]}")

echo "building ${#TARGETS[@]} targets (cargo fuzz build -O)" >&2
RUSTC_BOOTSTRAP=1 cargo fuzz build -O >&2
LOGS=$(mktemp -d /tmp/levee-fuzz.XXXXXX)
# The binaries are copied and run as they are: `cargo fuzz run` would rebuild from
# whatever the working tree holds by then, and an edit during a long run would break it.
BIN="$LOGS/bin"
mkdir -p "$BIN"
for t in "${TARGETS[@]}"; do
    cp "target/x86_64-unknown-linux-gnu/release/$t" "$BIN/$t"
done

run_one() {
    local t=$1
    mkdir -p "corpus/$t" "artifacts/$t"
    # -max_total_time ends the run; -print_final_stats gives the executions.
    "$BIN/$t" "corpus/$t" -artifact_prefix="artifacts/$t/" \
        -max_total_time="$SECONDS_EACH" -print_final_stats=1 -rss_limit_mb=2048 \
        -timeout=10 >"$LOGS/$t.log" 2>&1 || true
    echo "$t done" >&2
}

running=0
for t in "${TARGETS[@]}"; do
    run_one "$t" &
    running=$((running + 1))
    if [ "$running" -ge "$JOBS" ]; then
        wait -n
        running=$((running - 1))
    fi
done
wait

{
    echo
    echo "## $(date -u +%Y-%m-%d) — ${SECONDS_EACH} s per target, $JOBS at once"
    echo
    echo "- machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "- command: \`SECONDS_EACH=$SECONDS_EACH JOBS=$JOBS fuzz/run.sh\`"
    echo
    echo "| target | executions | exec/s | corpus files | coverage (cov) | crashes |"
    echo "|---|---:|---:|---:|---:|---|"
    for t in "${TARGETS[@]}"; do
        log="$LOGS/$t.log"
        execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
        rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
        cov=$( (grep -o 'cov: [0-9]*' "$log" || true) | tail -1 | awk '{print $2}')
        files=$(find "corpus/$t" -type f | wc -l)
        crashes=$(find "artifacts/$t" -type f | wc -l)
        verdict=none
        if [ -z "$execs" ]; then
            verdict="**did not run** (see $log)"
        elif [ "$crashes" -gt 0 ] || grep -q 'ERROR: libFuzzer\|panicked at' "$log"; then
            verdict="**$crashes in artifacts/$t** (see $log)"
        fi
        echo "| $t | ${execs:-?} | ${rate:-?} | $files | ${cov:-?} | $verdict |"
    done
} | tee "$LOGS/table.md"
if [ "${RECORD:-1}" = 1 ]; then
    cat "$LOGS/table.md" >>RESULTS.md
    echo "appended to fuzz/RESULTS.md; logs in $LOGS" >&2
fi
