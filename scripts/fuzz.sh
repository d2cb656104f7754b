#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan, build-fuzz/) and fuzzes
# each for N seconds, then prints one row per target: CPU seconds, execs/s,
# corpus size, coverage features and findings.
#   scripts/fuzz.sh [--seconds N] [--jobs J] [--regress] [TARGET...]
#     --seconds N  fuzz each target for N seconds of wall time (default 60)
#     --jobs J     run J targets at once (default 1)
#     --regress    only run each target once over its checked-in corpus
# A finding (crash, an input taking over 1 s, over 256 MiB of memory) is
# written to build-fuzz/findings/<target>/ and makes the script exit 1. The
# corpus grown by a run is kept in build-fuzz/corpus/<target>/ and reused by
# the next; the checked-in seeds and regressions are in tests/fuzz/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=60
jobs=1
regress=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --regress) regress=1; shift ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done

all=(config cli kubeconfig exec_credential node_json watch_stream api_error json_patch
     device_selector duration_quantity mig_minors deviceplugin_rpc cdi_names log_json)
[ ${#targets[@]} -eq 0 ] && targets=("${all[@]}")

# Longest input per target: a little over the largest realistic one.
max_len() {
  case "$1" in
    watch_stream) echo 16384 ;;
    config|kubeconfig|node_json) echo 8192 ;;
    exec_credential|api_error|mig_minors) echo 4096 ;;
    deviceplugin_rpc) echo 2048 ;;
    cdi_names|duration_quantity) echo 256 ;;
    *) echo 1024 ;;
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
    if "$build/fuzz/fuzz_$t" -runs=0 -timeout=5 -rss_limit_mb=512 "tests/fuzz/$t/corpus" \
        >"$build/regress-$t.log" 2>&1; then
      echo "fuzz.sh: $t: $(ls "tests/fuzz/$t/corpus" | wc -l) inputs ok"
    else
      echo "fuzz.sh: $t: FAILED (see $build/regress-$t.log)"; failed=1
    fi
  done
  exit $failed
fi

# One target: fuzz, then write its row to $build/logs/<t>.row.
run_one() {
  local t=$1
  local corpus=$build/corpus/$t findings=$build/findings/$t log=$build/logs/$t.log
  mkdir -p "$corpus" "$findings" "$build/logs"
  local before
  before=$(ls "$findings" | wc -l)
  local TIMEFORMAT='%U %S' cpu rc=0
  cpu=$( { time "$build/fuzz/fuzz_$t" "$corpus" "tests/fuzz/$t/corpus" \
             -dict="tests/fuzz/$t/dict" -max_len="$(max_len "$t")" -timeout=1 \
             -rss_limit_mb=256 -malloc_limit_mb=256 -max_total_time="$seconds" \
             -artifact_prefix="$findings/" -print_final_stats=1 >"$log" 2>&1 || echo "rc=$?" >>"$log"; } 2>&1 )
  local user sys
  read -r user sys <<<"$cpu"
  local last execs runs ft corp found
  last=$(grep -E '^#[0-9]+' "$log" | tail -1 || true)
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9a-zA-Z]*\).*/\1/p' <<<"$last")
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  execs=$(awk -v r="${runs:-0}" -v u="$user" -v s="$sys" 'BEGIN { c = u + s; printf "%d", (c > 0 ? r / c : 0) }')
  found=$(( $(ls "$findings" | wc -l) - before ))
  printf '%-18s %8.1f %10s %10s %12s %8s %8s\n' "$t" "$(awk -v u="$user" -v s="$sys" 'BEGIN{print u+s}')" \
    "$execs" "${runs:-0}" "${corp:-?}" "${ft:-?}" "$found" >"$build/logs/$t.row"
}

echo "fuzz.sh: ${#targets[@]} targets, ${seconds}s each, $jobs at a time"
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

printf '%-18s %8s %10s %10s %12s %8s %8s\n' target cpu_s execs/s execs corpus ft findings
status=0
for t in "${targets[@]}"; do
  cat "$build/logs/$t.row"
  if [ "$(awk '{print $NF}' "$build/logs/$t.row")" != "0" ]; then
    status=1
    echo "  finding: $(ls -t "$build/findings/$t" | head -1) (log: $build/logs/$t.log)"
  fi
done
exit $status
