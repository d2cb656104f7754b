#!/usr/bin/env bash
# The demo, as an operator might run it: two runs at once, then a run killed
# with SIGKILL (no trap runs) followed by a new run, which must stop the
# killed run's processes and remove its folder, sockets included.
#   demo_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1
build=$2
t=$(mktemp -d)
export TMPDIR=$t DEMO_SKIP_SETUP=1 DEMO_BUILD_DIR=$build
strays=()
finish() {
  for p in "${strays[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$t"
}
trap finish EXIT

fail() {
  echo "demo_test: $*" >&2
  for f in "$t"/*.log; do echo "--- $f" >&2; tail -n 20 "$f" >&2; done
  exit 1
}
alive() {  # a running process, not a zombie
  [ -r "/proc/$1/stat" ] && ! awk '{exit !($3 == "Z")}' "/proc/$1/stat"
}
wait_until() {  # wait_until SECONDS COMMAND...: polls the condition, fails at the deadline
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}
leftovers() { find "$t" -maxdepth 1 \( -name 'gpu-agent-demo.*' -o -name '.gpu-agent-demo-starting.*' \) | wc -l; }

# 1. Two runs at once: both finish the whole demo, and leave nothing.
bash "$src/scripts/demo.sh" >"$t/a.log" 2>&1 &
a=$!
bash "$src/scripts/demo.sh" >"$t/b.log" 2>&1 &
b=$!
wait "$a" || fail "the first of two concurrent runs failed"
wait "$b" || fail "the second of two concurrent runs failed"
grep -q "Summary" "$t/a.log" || fail "run a did not reach the summary"
grep -q "Summary" "$t/b.log" || fail "run b did not reach the summary"
# DRA mode: the claim prepared as a CDI device of its own spec, then unprepared.
for run in a b; do
  grep -q "NodePrepareResources default/demo-claim (3f1c0e2a-demo): pool demo-node device gpu-0000-06-00-0 cdi gpu-agent.github.io/claim=3f1c0e2a-demo-gpu-0000-06-00-0" "$t/$run.log" ||
    fail "run $run did not show the claim prepared"
  grep -q "NodeUnprepareResources default/demo-claim (3f1c0e2a-demo): done" "$t/$run.log" ||
    fail "run $run did not show the claim unprepared"
  grep -q "claim specs left in the CDI folder: 0" "$t/$run.log" ||
    fail "run $run left the claim's spec behind"
done
[ "$(leftovers)" = 0 ] || fail "concurrent runs left folders behind: $(ls "$t")"

# 2. A run killed with SIGKILL once the agent and the kubelet simulator run.
bash "$src/scripts/demo.sh" >"$t/killed.log" 2>&1 &
k=$!
has_two_children() { [ "$(cat "$t"/gpu-agent-demo.*/children 2>/dev/null | wc -l)" -ge 2 ]; }
wait_until 30 has_two_children || fail "the demo never started its processes"
old=$(echo "$t"/gpu-agent-demo.*)
mapfile -t orphans <"$old/children"
strays=("${orphans[@]}")
kill -KILL "$k"
wait "$k" 2>/dev/null || true
for p in "${orphans[@]}"; do alive "$p" || fail "process $p did not outlive the killed demo"; done
[ -S "$old/kubelet/kubelet.sock" ] || fail "the killed run left no socket to clean up"

bash "$src/scripts/demo.sh" >"$t/after.log" 2>&1 || fail "the run after a killed run failed"
grep -qF "cleaned up after an earlier run that was killed ($old)" "$t/after.log" ||
  fail "the run after a killed run did not say it cleaned up"
none_alive() { for p in "${orphans[@]}"; do ! alive "$p" || return 1; done; }
wait_until 10 none_alive || fail "the killed run's processes are still running"
[ ! -e "$old" ] || fail "the killed run's folder is still there"
[ "$(leftovers)" = 0 ] || fail "folders left behind: $(ls "$t")"
echo "demo_test: concurrent runs, and a run after a killed run, all clean"
