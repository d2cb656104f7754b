#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: first in a normal
# (RelWithDebInfo, warnings as errors) build in build/, then in an
# AddressSanitizer + UndefinedBehaviorSanitizer build in build-asan/ with a
# 2-minute soak there; then every libFuzzer target over its checked-in corpus
# and for a short fuzz run (clang, build-fuzz/; FUZZ_SECONDS each, default 10).
#   scripts/test.sh            all of it
#   scripts/test.sh --quick    the normal build only
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
[ "${1:-}" = "--quick" ] && quick=1
jobs=$(nproc)

# The packages, and helm and kubectl for the chart test (build/tools).
./scripts/install-deps.sh --helm build/tools

if command -v clang-format >/dev/null; then
  unformatted=$(git ls-files '*.cc' '*.h' 2>/dev/null | xargs -r clang-format --dry-run 2>&1 | grep -c "warning:" || true)
  if [ "$unformatted" != "0" ]; then
    echo "test.sh: clang-format would change $unformatted places; run: git ls-files '*.cc' '*.h' | xargs clang-format -i" >&2
    exit 1
  fi
fi

run_suite() {
  local dir=$1; shift
  echo "=== configure $dir ($*)"
  cmake -S . -B "$dir" -G Ninja "$@" >/dev/null
  echo "=== build $dir"
  cmake --build "$dir" -j "$jobs"
  echo "=== test $dir"
  (cd "$dir" && ctest -j "$jobs" --output-on-failure --timeout 300)
}

run_suite build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGPU_AGENT_WERROR=ON
if [ "$quick" -eq 0 ]; then
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    run_suite build-asan -DCMAKE_BUILD_TYPE=Debug -DGPU_AGENT_SANITIZE=ON
  # Both modes under a seeded random schedule of faults, in the sanitizer
  # build, for a bounded time (scripts/soak.sh; the seed is printed). On a
  # shared runner a value right but past its timing bound is reported, not
  # failed; stuck values, crashes and sanitizer reports fail.
  echo "=== soak build-asan (2 minutes)"
  ./scripts/soak.sh --asan --minutes 2 --timing-advisory
fi
if [ "$quick" -eq 0 ]; then
  if command -v clang++ >/dev/null; then
    echo "=== fuzz (build-fuzz): corpora, then ${FUZZ_SECONDS:-10}s per target"
    ./scripts/fuzz.sh --regress
    ./scripts/fuzz.sh --seconds "${FUZZ_SECONDS:-10}" --jobs "$jobs"
  elif [ "${CI:-}" = "true" ]; then
    echo "test.sh: clang++ is missing; CI needs it for the fuzz targets" >&2
    exit 1
  else
    echo "test.sh: clang++ not found; skipping the fuzz targets (scripts/fuzz.sh)"
  fi
fi
echo "test.sh: all tests passed"
