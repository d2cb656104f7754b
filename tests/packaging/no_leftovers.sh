#!/usr/bin/env bash
# Runs a command with TMPDIR set to a folder of its own, then fails if any
# process it started is still alive: one whose command line, environment,
# root folder or working folder names that folder (every program a script
# starts inherits TMPDIR, and its sockets and logs live under it). What is
# left is listed, then killed, so a failing run leaves nothing either.
#   no_leftovers.sh NAME -- COMMAND [ARGS...]
# COMMAND's exit code is kept when nothing is left.
set -uo pipefail
name=$1
shift
[ "${1:-}" = "--" ] && shift
# Short: the unix socket paths the scripts make under it must stay under
# 108 bytes.
dir=$(mktemp -d "/tmp/lo.XXXXXX")
trap 'rm -rf "$dir"' EXIT

TMPDIR=$dir "$@"
rc=$?

# The processes that name $dir, but this script and zombies.
named() {
  local p pid state
  for p in /proc/[0-9]*; do
    pid=${p#/proc/}
    [ "$pid" = "$$" ] && continue
    state=$(awk '{print $3}' "$p/stat" 2>/dev/null) || continue
    [ -z "$state" ] || [ "$state" = Z ] && continue
    if { tr '\0' '\n' <"$p/cmdline"; } 2>/dev/null | grep -qF "$dir" ||
      { tr '\0' '\n' <"$p/environ"; } 2>/dev/null | grep -qF "TMPDIR=$dir" ||
      readlink "$p/root" 2>/dev/null | grep -qF "$dir" ||
      readlink "$p/cwd" 2>/dev/null | grep -qF "$dir"; then
      echo "$pid"
    fi
  done
}

# A process stopped with SIGKILL just before the command returned may take
# a moment to be reaped.
deadline=$((SECONDS + 5))
left=$(named)
while [ -n "$left" ] && [ $SECONDS -lt $deadline ]; do
  sleep 0.1
  left=$(named)
done
if [ -n "$left" ]; then
  echo "no_leftovers: $name left processes running:" >&2
  for pid in $left; do
    echo "  $pid: $({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null)" >&2
  done
  for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
  exit 1
fi
exit $rc
