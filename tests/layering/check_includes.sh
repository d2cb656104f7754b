#!/usr/bin/env bash
# Fails when a file under src/ includes a project header from a room its own
# room may not use (tests/layering/rules), naming the file, line and rule;
# and when a sealed room (an "only" line of the rules: the API server room
# is transport and Kubernetes primitives, so it uses base alone) is given
# more by its rule line, which is how a feature would move back in.
#   check_includes.sh [SRC_DIR [RULES]]   check a tree (default: this repo's src/)
#   check_includes.sh --self-test         prove every rule fails when broken
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)

# Rooms, deepest first, and what each may include.
load_rules() {
  local room deps
  rooms=()
  declare -gA allowed=()
  declare -gA only=()
  while read -r room deps; do
    [ -z "$room" ] && continue
    case $room in \#*) continue ;; esac
    if [ "$room" = only ]; then
      read -r room deps <<<"$deps"
      only[$room]=$deps
      continue
    fi
    rooms+=("$room")
    allowed[$room]="$room $deps"
  done <"$1"
  # Deepest first, so agent/run wins over agent.
  mapfile -t rooms < <(printf '%s\n' "${rooms[@]}" | awk -F/ '{print NF" "$0}' | sort -rn | cut -d' ' -f2-)
}

room_of() {  # path relative to src/
  local r
  for r in "${rooms[@]}"; do
    case $1 in "$r"/*) echo "$r"; return ;; esac
  done
}

# The room a project include names ("agent/plan/resource_plan.h" -> agent/plan),
# or nothing for a header outside the project (absl/, grpcpp/, ...).
target_room() {
  local r
  for r in "${rooms[@]}"; do
    case $1 in "$r"/*)
      # A header directly in a room's folder, not in a deeper room of it.
      echo "$r"; return ;;
    esac
  done
}

# A sealed room's rule line allows what its "only" line says and no more.
check_sealed() {  # rules file; prints violations, returns 1 if any
  local bad=0 room r
  for room in "${!only[@]}"; do
    for r in ${allowed[$room]:-}; do
      [ "$r" = "$room" ] && continue
      case " ${only[$room]} " in *" $r "*) continue ;; esac
      echo "$1: room $room is sealed to \"${only[$room]}\" (an \"only\" line) but its rule allows $r:" \
        "a feature that needs $r belongs in a room of its own"
      bad=1
    done
  done
  return $bad
}

check_tree() {  # src dir, rules file; prints violations, returns 1 if any
  local src=$1 bad=0 file rel room line num inc target ok r
  load_rules "$2"
  check_sealed "$2" || bad=1
  while IFS= read -r file; do
    rel=${file#"$src"/}
    room=$(room_of "$rel")
    [ -z "$room" ] && { echo "$rel: in no room of $2"; bad=1; continue; }
    while IFS=: read -r num line; do
      inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^">]+)[">].*/\1/' <<<"$line")
      # A path that climbs out of its folder could reach any room unseen.
      case $inc in
        ../* | */../* | ./*)
          echo "$rel:$num: includes \"$inc\": name project headers from src/ (room/file.h)"
          bad=1
          continue
          ;;
      esac
      target=$(target_room "$inc")
      [ -z "$target" ] && continue
      ok=0
      for r in ${allowed[$room]}; do [ "$r" = "$target" ] && ok=1; done
      if [ $ok -eq 0 ]; then
        echo "$rel:$num: includes \"$inc\": room $room may not use $target (allowed: ${allowed[$room]})"
        bad=1
      fi
    done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]' "$file")
  done < <(find "$src" -type f \( -name '*.h' -o -name '*.cc' \) | sort)
  return $bad
}

self_test() {
  local tmp fails=0 room target deps r all
  tmp=$(mktemp -d)
  load_rules "$here/rules"
  all=("${rooms[@]}")
  for room in "${all[@]}"; do
    deps=${allowed[$room]}
    for target in "${all[@]}"; do
      # Only rooms this one may not use; a room may always use its own.
      case " $deps " in *" $target "*) continue ;; esac
      rm -rf "$tmp/src"; mkdir -p "$tmp/src/$room"
      printf '#include "%s/x.h"\n' "$target" >"$tmp/src/$room/probe.cc"
      if check_tree "$tmp/src" "$here/rules" >/dev/null; then
        echo "self-test: $room including $target was NOT refused"; fails=1
      fi
      load_rules "$here/rules"
    done
    # Every allowed one passes.
    rm -rf "$tmp/src"; mkdir -p "$tmp/src/$room"
    for r in $deps; do printf '#include "%s/x.h"\n' "$r"; done >"$tmp/src/$room/probe.cc"
    if ! check_tree "$tmp/src" "$here/rules"; then
      echo "self-test: $room's allowed includes were refused"; fails=1
    fi
    load_rules "$here/rules"
  done
  # The other spellings of an include: angle brackets and a climbing path.
  for probe in '#include <agent/run/x.h>' '#  include "agent/run/x.h"' '#include "../agent/run/x.h"'; do
    rm -rf "$tmp/src"; mkdir -p "$tmp/src/nvml"
    printf '%s\n' "$probe" >"$tmp/src/nvml/probe.cc"
    if check_tree "$tmp/src" "$here/rules" >/dev/null; then
      echo "self-test: nvml with '$probe' was NOT refused"; fails=1
    fi
    load_rules "$here/rules"
  done
  # A sealed room given more by its rule line, and a sealed room's file
  # including a feature's room.
  for room in "${!only[@]}"; do
    sed -E "s|^$room([[:space:]].*)?\$|$room ${only[$room]} dra|" "$here/rules" >"$tmp/rules"
    rm -rf "$tmp/src"; mkdir -p "$tmp/src/$room"
    printf '#include "base/x.h"\n' >"$tmp/src/$room/probe.cc"
    if check_tree "$tmp/src" "$tmp/rules" >/dev/null; then
      echo "self-test: sealed $room allowed dra by its rule line was NOT refused"; fails=1
    fi
    load_rules "$here/rules"
    printf '#include "dra/x.h"\n' >"$tmp/src/$room/probe.cc"
    if check_tree "$tmp/src" "$here/rules" >/dev/null; then
      echo "self-test: sealed $room including dra was NOT refused"; fails=1
    fi
    load_rules "$here/rules"
  done
  [ ${#only[@]} -gt 0 ] || { echo "self-test: no sealed room (only line) in the rules"; fails=1; }
  # A file outside every room.
  rm -rf "$tmp/src"; mkdir -p "$tmp/src/elsewhere"
  printf '#include "base/x.h"\n' >"$tmp/src/elsewhere/probe.cc"
  if check_tree "$tmp/src" "$here/rules" >/dev/null; then
    echo "self-test: a file in no room was NOT refused"; fails=1
  fi
  rm -rf "$tmp"
  [ $fails -eq 0 ] && echo "self-test: every rule refuses what it must and takes what it may"
  return $fails
}

if [ "${1:-}" = "--self-test" ]; then
  self_test
  exit $?
fi
src=${1:-$here/../../src}
rules=${2:-$here/rules}
if check_tree "$(cd "$src" && pwd)" "$rules"; then
  echo "check_includes: every include under src/ goes the allowed way"
else
  echo "check_includes: includes cross room boundaries the wrong way (see above; rules in $rules)"
  exit 1
fi
