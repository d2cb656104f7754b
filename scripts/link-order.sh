#!/usr/bin/env bash
# Writes src/agent/link_order.txt, the order in which lld lays out the
# agent's code (CMakeLists.txt, GPU_AGENT_LINK_ORDER): the functions each mode
# runs, found by running the agent under valgrind's callgrind in the benches'
# short runs (e2e_bench --smoke: plugin and static mode; dra_bench: DRA
# mode), grouped by the modes that run them, so that the code one mode runs
# lies together and the kernel, which maps code 64 KiB around each page
# touched, maps little else. Run it again when the code has moved on: a
# function the file does not name is laid out after those it does, and
# scripts/bench.sh's footprint rows show what that costs.
#   scripts/link-order.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
out=src/agent/link_order.txt

if ! command -v valgrind >/dev/null; then
  echo "link-order: valgrind is needed (apt-get install valgrind)" >&2
  exit 1
fi
cmake --build "$build" --target gpu-agent e2e_bench dra_bench fake_nvml

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/cg"
agent=$(realpath "$build/gpu-agent")
cat >"$tmp/agent" <<EOF
#!/bin/sh
echo "\$\$" >>"$tmp/started"
exec valgrind --tool=callgrind --demangle=no --dump-line=no --compress-strings=no \
  --compress-pos=no --callgrind-out-file="$tmp/cg/%p.out" "$agent" "\$@"
EOF
chmod +x "$tmp/agent"
GPU_AGENT_BINARY="$tmp/agent" "$build/bench/e2e_bench" --smoke >"$tmp/e2e.log" 2>&1 ||
  { cat "$tmp/e2e.log" >&2; exit 1; }
GPU_AGENT_BINARY="$tmp/agent" "$build/bench/dra_bench" --calls 5 >"$tmp/dra.log" 2>&1 ||
  { cat "$tmp/dra.log" >&2; exit 1; }

python3 - "$tmp/cg" "$agent" "$out" <<'EOF'
import glob, os, re, sys

cg, agent, out = sys.argv[1:]
runs = {"plugin": set(), "static": set(), "dra": set()}
for path in glob.glob(os.path.join(cg, "*.out")):
    mode, obj, fns = None, None, set()
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("cmd:"):
                m = re.search(r"--mode[= ](\S+)", line)
                mode = m.group(1) if m else "plugin"
                if mode not in runs:
                    sys.exit(f"link-order: an agent run in mode {mode!r}: {path}")
            elif line.startswith("ob="):
                obj = line[3:].strip()
            elif line.startswith("fn=") and obj == agent:
                # callgrind marks a recursion's levels ('2) and names code
                # without a symbol by its address or in parentheses.
                name = re.sub(r"'[0-9]+$", "", line[3:].strip())
                if not name.startswith("0x") and " " not in name and "(" not in name:
                    fns.add(name)
    runs[mode] |= fns
for mode, fns in runs.items():
    if not fns:
        sys.exit(f"link-order: no {mode}-mode run was recorded")
# callgrind writes its file when the agent exits; an agent a benchmark
# killed (SIGKILL) leaves none, and its run is missing from the groups.
started = len(open(os.path.join(cg, "..", "started")).read().split())
recorded = len(glob.glob(os.path.join(cg, "*.out")))
if recorded < started:
    print(f"link-order: {started - recorded} of {started} agents left no profile (killed)")
P, S, D = runs["plugin"], runs["static"], runs["dra"]
# Plugin mode's code, then DRA's, then static mode's, each mode's as one
# run where it can be: what plugin and static share first, what all three
# share between plugin and DRA.
groups = [
    ("plugin and static mode", (P & S) - D),
    ("plugin mode alone", P - S - D),
    ("plugin and DRA mode", (P & D) - S),
    ("every mode", P & S & D),
    ("DRA and static mode", (S & D) - P),
    ("DRA mode alone", D - P - S),
    ("static mode alone", S - P - D),
]
with open(out, "w") as f:
    f.write("# The agent's code in the order lld lays it out (--symbol-ordering-file):\n"
            "# the functions each mode ran under scripts/link-order.sh, which wrote\n"
            "# this file, grouped by the modes that ran them. Not edited by hand.\n")
    for name, fns in groups:
        f.write(f"# {name}: {len(fns)}\n")
        for fn in sorted(fns):
            f.write(fn + "\n")
print(f"link-order: {out}: plugin {len(P)}, static {len(S)}, DRA {len(D)} functions")
EOF
