#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, build-fuzz/) and fuzzes
# each for N seconds, then prints one row per target: CPU seconds, execs/s,
# corpus size, coverage features and findings.
#   scripts/fuzz.sh [--seconds N | --cpu-seconds N] [--jobs J] [--regress] [TARGET...]
#     --seconds N  fuzz each target for N seconds of wall time (default 60)
#     --cpu-seconds N  fuzz each target until it has used N seconds of CPU
#                  (on a shared machine wall time says little; run at a low
#                  priority with `nice` beside other work)
#     --jobs J     run J targets at once (default 1)
#     --regress    only run each target once over its checked-in corpus
# A finding (crash, an input taking over 1 s, over 256 MiB of memory) is
# written to build-fuzz/findings/<target>/ and makes the script exit 1; a
# timeout whose input, run alone, finishes using under 1 s of CPU (the
# machine stalled the process) is counted under "stalls" and fuzzing goes on. The
# corpus grown by a run is kept in build-fuzz/corpus/<target>/ and reused by
# the next; the checked-in seeds and regressions are in tests/fuzz/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
cpu_goal=0
jobs=1
regress=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --cpu-seconds) cpu_goal=$2; seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --regress) regress=1; shift ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

all=(config cli kubeconfig exec_credential node_json watch_stream api_error json_patch
     device_selector duration_quantity mig_minors deviceplugin_rpc deviceplugin_socket cdi_names
     log_json ld_cache slotted_file slice_watch dra_claim metrics_request)
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

# Longest input per target: a little over the largest realistic one.
max_len() {
  case "$1" in
    watch_stream) echo 16384 ;;
    metrics_request) echo 8192 ;;
    config|kubeconfig|node_json) echo 8192 ;;
    exec_credential|api_error|mig_minors|ld_cache|slotted_file) echo 4096 ;;
    deviceplugin_rpc|deviceplugin_socket) echo 2048 ;;
    cdi_names|duration_quantity) echo 256 ;;
    *) echo 1024 ;;
  esac
}

# Seed folders a target reads beside its own corpus: fixtures the tests
# already hold, so no seed is checked in twice.
seed_dirs() {
  case "$1" in
    mig_minors) echo tests/fixtures/proc ;;
  esac
}

# ASan options a target puts before $ASAN_OPTIONS while it fuzzes (read
# last, $ASAN_OPTIONS can override them). The two device-plugin targets run
# Debian's protobuf and gRPC, built without frame pointers: ASan's fast
# unwinder, recording each malloc's stack, follows a frame pointer that is
# really a heap address, so many stacks end in a different bogus frame and
# ASan's stack store (never freed) grows ~16 bytes per execution, past the
# 256 MiB limit after ~11 million runs while the live heap stays at 27.7 MB.
# Two frames (the allocation and its caller) stop the bogus ones. To see a
# finding's whole stacks, run its input with fast_unwind_on_malloc=0.
asan_extra() {
  case "$1" in
    deviceplugin_rpc|deviceplugin_socket) echo "malloc_context_size=2:" ;;
  esac
}

if ! command -v clang++ >/dev/null; then
  echo "fuzz.sh: clang++ is missing (apt-get install clang libclang-rt-14-dev)" >&2
  exit 3
fi
build=build-fuzz
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Fuzz -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_COMPILER=clang -DGPU_AGENT_FUZZ=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzzers

# A small quarantine: ASan's default (256 MiB of freed memory held back)
# alone would pass the 256 MiB limit.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:quarantine_size_mb=16}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

if [ "$regress" -eq 1 ]; then
  failed=0
  for t in "${targets[@]}"; do
    # shellcheck disable=SC2046
    if "$build/fuzz/fuzz_$t" -runs=0 -timeout=5 -rss_limit_mb=512 "tests/fuzz/$t/corpus" \
        $(seed_dirs "$t") >"$build/regress-$t.log" 2>&1; then
      echo "fuzz.sh: $t: $(ls "tests/fuzz/$t/corpus" | wc -l) inputs ok"
    else
      echo "fuzz.sh: $t: FAILED (see $build/regress-$t.log)"; failed=1
    fi
  done
  exit $failed
fi

# True when a timeout input was the machine, not the code: run alone with
# 10 s of wall time it finishes, having used under 1 s of CPU. A hang (still
# running after 10 s) or an input that really takes a CPU second is a finding.
stalled() {
  local t=$1 input=$2 log=$3 out rc=0
  local TIMEFORMAT='%U %S'
  out=$( { time "$build/fuzz/fuzz_$t" -timeout=10 -runs=1 -artifact_prefix="$build/logs/rerun-" \
             "$input" >>"$log" 2>&1 || echo failed; } 2>&1 )
  [[ $out == *failed* ]] && return 1
  awk -v u="${out%% *}" -v s="${out##* }" 'BEGIN { exit !(u + s < 1.0) }'
}

# One target: fuzz, then write its row to $build/logs/<t>.row. libFuzzer's
# -timeout is wall time, so a busy machine that stalls the process for a
# second reports a timeout: each timeout input is run again on its own, and
# one that then passes is kept as unconfirmed-* (not a finding) and fuzzing
# goes on for the time left.
run_one() {
  local t=$1
  local corpus=$build/corpus/$t findings=$build/findings/$t log=$build/logs/$t.log
  mkdir -p "$corpus" "$findings" "$build/logs"
  : >"$log"
  local start=$SECONDS left=$seconds cpu_total=0 runs_total=0 found=0 unconfirmed=0
  local last_status=""
  local TIMEFORMAT='%U %S'
  while :; do
    local seg=$build/logs/$t.segment cpu user sys
    ls "$findings" >"$seg.before"
    cpu=$( { time env ASAN_OPTIONS="$(asan_extra "$t")$ASAN_OPTIONS" \
               "$build/fuzz/fuzz_$t" "$corpus" "tests/fuzz/$t/corpus" $(seed_dirs "$t") \
               -dict="tests/fuzz/$t/dict" -max_len="$(max_len "$t")" -timeout=1 \
               -rss_limit_mb=256 -malloc_limit_mb=256 -max_total_time="$left" \
               -artifact_prefix="$findings/" -print_final_stats=1 >"$seg" 2>&1 || true; } 2>&1 )
    cat "$seg" >>"$log"
    read -r user sys <<<"$cpu"
    cpu_total=$(awk -v a="$cpu_total" -v u="$user" -v s="$sys" 'BEGIN { print a + u + s }')
    local last
    last=$(grep -E '^#[0-9]+' "$seg" | tail -1 || true)
    local n
    n=$(sed -n 's/^#\([0-9]*\).*/\1/p' <<<"$last")
    runs_total=$((runs_total + ${n:-0}))
    [ -n "$last" ] && last_status=$last
    local new
    new=$(ls "$findings" | grep -vxF -f "$seg.before" || true)
    [ -z "$new" ] && [ "$cpu_goal" -eq 0 ] && break
    local resumed=0
    for f in $new; do
      if [[ $f == timeout-* ]] && stalled "$t" "$findings/$f" "$log"; then
        mv "$findings/$f" "$findings/unconfirmed-$f"
        unconfirmed=$((unconfirmed + 1))
        resumed=1
      else
        found=$((found + 1))
      fi
    done
    [ "$found" -eq 0 ] || break
    if [ "$cpu_goal" -gt 0 ]; then
      # Another segment for the CPU time still owed (the corpus carries over).
      left=$(awk -v g="$cpu_goal" -v c="$cpu_total" 'BEGIN { l = g - c; printf "%d", (l > 0 ? l + 1 : 0) }')
      [ "$left" -gt 5 ] || break
    else
      left=$((seconds - (SECONDS - start)))
      [ "$resumed" -eq 1 ] && [ "$left" -gt 5 ] || break
    fi
  done
  local ft corp execs
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"${last_status:-}")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"${last_status:-}")
  execs=$(awk -v r="$runs_total" -v c="$cpu_total" 'BEGIN { printf "%d", (c > 0 ? r / c : 0) }')
  printf '%-18s %8.1f %10s %10s %12s %8s %8s %6s\n' "$t" "$cpu_total" "$execs" "$runs_total" \
    "${corp:-?}" "${ft:-?}" "$found" "$unconfirmed" >"$build/logs/$t.row"
}

if [ "$cpu_goal" -gt 0 ]; then
  echo "fuzz.sh: ${#targets[@]} targets, ${cpu_goal} CPU seconds each, $jobs at a time"
else
  echo "fuzz.sh: ${#targets[@]} targets, ${seconds}s each, $jobs at a time"
fi
running=0
for t in "${targets[@]}"; do
  run_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait

printf '%-18s %8s %10s %10s %12s %8s %8s %6s\n' target cpu_s execs/s execs corpus ft findings stalls
status=0
for t in "${targets[@]}"; do
  cat "$build/logs/$t.row"
  if [ "$(awk '{print $(NF-1)}' "$build/logs/$t.row")" != "0" ]; then
    status=1
    echo "  finding: $(ls -t "$build/findings/$t" | head -1) (log: $build/logs/$t.log)"
  fi
done
exit $status
