#!/usr/bin/env bash
# Runs every benchmark in one go and writes bench/RESULTS.md: the machine,
# the end-to-end table (figure, value, budget, pass/fail) and the
# micro-benchmark medians.
#   scripts/bench.sh [--idle-seconds N]
set -euo pipefail
cd "$(dirname "$0")/.."
idle=30
[ "${1:-}" = "--idle-seconds" ] && idle=$2

./scripts/install-deps.sh >/dev/null
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target gpu-agent e2e_bench micro_bench fake_nvml fake-nvml-tool

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
./build/bench/e2e_bench --idle-seconds "$idle" --markdown "$tmp/e2e.md"
./build/bench/micro_bench --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_min_time=0.05 --benchmark_format=console 2>/dev/null | grep -E "_median|Benchmark|---" >"$tmp/micro.txt" || true

{
  echo "# Benchmark results"
  echo
  echo "Written by scripts/bench.sh on $(date -u +%Y-%m-%d) (UTC)."
  echo
  echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)."
  echo "The machine is shared and noisy: round-trip figures are ratios to a baseline RPC taken in the"
  echo "same run, interleaved call by call; latencies are medians unless marked."
  echo
  echo "## End to end (real binary, kubelet simulator, NVML stand-in)"
  echo
  cat "$tmp/e2e.md"
  echo
  echo "## Micro-benchmarks (median of 5 repetitions)"
  echo
  echo '```'
  cat "$tmp/micro.txt"
  echo '```'
} >bench/RESULTS.md
echo "bench.sh: wrote bench/RESULTS.md"
