#!/usr/bin/env bash
# The soak: plugin and static mode at once, the real gpu-agent binary, a
# seeded random schedule of faults (kubelet restarts, dropped streams,
# reloads, XIDs and resets, NVML errors; API server 5xx/429, dropped and
# hung requests, 410s, restarts), invariants checked as it goes and a
# results table at the end (tests/soak/soak.cc). Exit 0 only without
# violations.
#   scripts/soak.sh [--minutes N] [--seed S] [--asan] [--timing-advisory] [--build DIR]
#   --asan: the AddressSanitizer + UndefinedBehaviorSanitizer build (build-asan)
#   --timing-advisory: values right but past their bound are reported, not
#     failed (stuck values, crashes, sanitizer reports and drift still fail)
#   --build DIR: the build in DIR as it is (nothing configured or built)
# SOAK_LOG_DIR=dir keeps both agents' logs.
set -euo pipefail
cd "$(dirname "$0")/.."

minutes=10
seed=$(date +%s)
dir=build
extra=()
given=""
cmake_args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPU_AGENT_WERROR=ON)
while [ $# -gt 0 ]; do
  case "$1" in
    --minutes) minutes=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --timing-advisory) extra+=(--timing-advisory); shift ;;
    --build) given=$2; shift 2 ;;
    --asan)
      dir=build-asan
      cmake_args=(-DCMAKE_BUILD_TYPE=Debug -DGPU_AGENT_SANITIZE=ON)
      export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
      export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
      shift ;;
    *) echo "usage: scripts/soak.sh [--minutes N] [--seed S] [--asan] [--timing-advisory] [--build DIR]" >&2; exit 2 ;;
  esac
done

if [ -n "$given" ]; then
  dir=$given
else
  if [ ! -f "$dir/build.ninja" ]; then
    cmake -S . -B "$dir" -G Ninja "${cmake_args[@]}" >/dev/null
  fi
  cmake --build "$dir" -j "$(nproc)" --target soak gpu-agent fake_nvml fake-nvml-tool >/dev/null
fi
exec "$dir/soak" --minutes "$minutes" --seed "$seed" ${extra[@]+"${extra[@]}"}
