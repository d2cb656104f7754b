#!/usr/bin/env bash
# The CDI spec `gpu-agent cdi generate` writes, taken by a real CDI consumer:
# podman (Debian 12's 4.3.1) resolves "<kind>=<id>" for every ID Allocate can
# return (each GPU and MIG device of the 2-GPU MIG fixture by UUID and by
# index, under migStrategy mixed) and "all", and the OCI config.json it
# generates has the device nodes (type and numbers podman read from the
# nodes this test made), the driver's libraries and the env. An unknown
# name must be refused. podman 4.3 reads specs only from /etc/cdi and
# /var/run/cdi: the test writes one file there under a kind of its own and
# removes it; podman's storage is private (--root/--runroot/--tmpdir, vfs).
# `podman init` writes config.json before the runtime runs, so the checks
# hold where the sandbox stops the runtime itself.
# Needs root (mknod, rootful podman): exits 77 (skipped) without it or
# without podman.
set -euo pipefail
SRC=$(cd "$1" && pwd)
BUILD=$(cd "$2" && pwd)

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: needs root (mknod for the device nodes, rootful podman)"
  exit 77
fi
if ! command -v podman >/dev/null; then
  echo "SKIP: podman is not installed (scripts/install-deps.sh installs it)"
  exit 77
fi
echo "podman: $(podman --version)"

T=$(mktemp -d /tmp/cdi-podman.XXXXXX)
VENDOR="gpu-agent-test-$$.example"  # its own kind: no clash with a real spec
KIND="$VENDOR/gpu"
SPEC_DIR=/var/run/cdi
MADE_SPEC_DIR=0
if [ ! -d "$SPEC_DIR" ]; then
  mkdir -p "$SPEC_DIR"
  MADE_SPEC_DIR=1
fi
SPEC="$SPEC_DIR/$VENDOR-gpu.json"
P=(podman --root "$T/root" --runroot "$T/runroot" --tmpdir "$T/tmp" --storage-driver vfs
   --cgroup-manager cgroupfs --events-backend none)
cleanup() {
  "${P[@]}" rm -a -f >/dev/null 2>&1 || true
  rm -f "$SPEC"
  if [ "$MADE_SPEC_DIR" = 1 ]; then rmdir "$SPEC_DIR" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

# A driver root as an installed 550.54.15 driver leaves it, and a dev root
# with the driver's character devices.
V=550.54.15
LIB="$T/driver/usr/lib/x86_64-linux-gnu"
mkdir -p "$LIB" "$T/driver/usr/bin" "$T/driver/lib/firmware/nvidia/$V" "$T/dev/dev/nvidia-caps" \
  "$T/proc/driver/nvidia-caps" "$T/rootfs"
for l in libnvidia-ml libcuda libnvidia-ptxjitcompiler libnvidia-nvvm; do
  echo "placeholder" >"$LIB/$l.so.$V"
done
ln -s "libnvidia-ml.so.$V" "$LIB/libnvidia-ml.so.1"
ln -s "libcuda.so.$V" "$LIB/libcuda.so.1"
ln -s libcuda.so.1 "$LIB/libcuda.so"
ln -s "libnvidia-ptxjitcompiler.so.$V" "$LIB/libnvidia-ptxjitcompiler.so.1"
ln -s "libnvidia-nvvm.so.$V" "$LIB/libnvidia-nvvm.so.4"
echo '#!/bin/sh' >"$T/driver/usr/bin/nvidia-smi"
echo firmware >"$T/driver/lib/firmware/nvidia/$V/gsp_ga10x.bin"
mknod "$T/dev/dev/nvidiactl" c 195 255
mknod "$T/dev/dev/nvidia-uvm" c 510 0
mknod "$T/dev/dev/nvidia0" c 195 0
mknod "$T/dev/dev/nvidia1" c 195 1
for cap in 12 13 21 22 30 31; do mknod "$T/dev/dev/nvidia-caps/nvidia-cap$cap" c 511 "$cap"; done
printf 'gpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\ngpu0/gi2/access 21\ngpu0/gi2/ci0/access 22\ngpu0/gi3/access 30\ngpu0/gi3/ci0/access 31\n' \
  >"$T/proc/driver/nvidia-caps/mig-minors"

AGENT_ENV=(env LD_LIBRARY_PATH="$BUILD/fake-nvml"
           FAKE_NVML_FIXTURE="$SRC/tests/fixtures/nvml/2-gpu-mig.yaml" CONFIG_FILE=)
"${AGENT_ENV[@]}" "$BUILD/gpu-agent" cdi generate --mig-strategy mixed \
  --nvidia-driver-root "$T/driver" --dev-root "$T/dev" --proc-root "$T/proc" \
  --cdi-vendor "$VENDOR" --nvidia-cdi-hook-path "" --output-file "$SPEC" ||
  fail "gpu-agent cdi generate failed"
"${AGENT_ENV[@]}" "$BUILD/gpu-agent" devices -o json >"$T/devices.json"

# Every ID Allocate can return, with the device nodes each must bring:
# "<name> <path>:<major>:<minor> ...".
python3 - "$T/devices.json" >"$T/expect" <<'EOF'
import json, sys
caps = {(1, 0): [12, 13], (2, 0): [21, 22], (3, 0): [30, 31]}
every = []
lines = []
for g in json.load(open(sys.argv[1])):
    node = "/dev/nvidia%d:195:%d" % (g["minor"], g["minor"])
    units = []
    if g.get("migEnabled"):
        for m in g["migDevices"]:
            nodes = [node] + ["/dev/nvidia-caps/nvidia-cap%d:511:%d" % (c, c)
                              for c in caps[(m["gpuInstanceId"], m["computeInstanceId"])]]
            units += [(m["uuid"], nodes), ("%d:%d" % (g["index"], m["index"]), nodes)]
    else:
        units += [(g["uuid"], [node]), (str(g["index"]), [node])]
    for name, nodes in units:
        lines.append(name + " " + " ".join(nodes))
        every += [n for n in nodes if n not in every]
lines.append("all " + " ".join(every))
print("\n".join(lines))
EOF
[ "$(wc -l <"$T/expect")" -eq 9 ] || fail "expected 9 names, got: $(cat "$T/expect")"

check_config() {  # <config.json> <node spec>...
  python3 - "$@" "$T/driver" <<'EOF'
import json, os, sys
cfg = json.load(open(sys.argv[1]))
driver = sys.argv[-1]
want = sys.argv[2:-1] + ["/dev/nvidiactl:195:255", "/dev/nvidia-uvm:510:0"]
have = {d["path"]: d for d in cfg["linux"].get("devices") or []}
errors = []
for w in want:
    path, major, minor = w.split(":")
    d = have.get(path)
    if d is None:
        errors.append("device %s missing (have %s)" % (path, sorted(have)))
    elif (d.get("type"), d.get("major"), d.get("minor")) != ("c", int(major), int(minor)):
        errors.append("device %s is %s" % (path, d))
extra = set(have) - {w.split(":")[0] for w in want}
if extra:
    errors.append("devices not asked for: %s" % sorted(extra))
lib = "/usr/lib/x86_64-linux-gnu/"
mounts = {m["destination"]: m for m in cfg["mounts"]}
for dest, src in [(lib + "libcuda.so.1", "libcuda.so.550.54.15"),
                  (lib + "libcuda.so", "libcuda.so.550.54.15"),
                  (lib + "libnvidia-ml.so.1", "libnvidia-ml.so.550.54.15"),
                  (lib + "libnvidia-nvvm.so.4", "libnvidia-nvvm.so.550.54.15"),
                  ("/usr/bin/nvidia-smi", None),
                  ("/lib/firmware/nvidia/550.54.15/gsp_ga10x.bin", None)]:
    m = mounts.get(dest)
    if m is None:
        errors.append("mount %s missing" % dest)
    elif not m["source"].startswith(driver) or (src and not m["source"].endswith("/" + src)):
        errors.append("mount %s from %s" % (dest, m["source"]))
    elif "ro" not in m.get("options", []):
        errors.append("mount %s not read-only: %s" % (dest, m.get("options")))
if "NVIDIA_VISIBLE_DEVICES=void" not in cfg["process"]["env"]:
    errors.append("NVIDIA_VISIBLE_DEVICES=void not in the env")
if errors:
    print("\n".join(errors))
    sys.exit(1)
EOF
}

resolved=0
while read -r name nodes; do
  # Options before --rootfs's path: podman takes what follows it as the command.
  id=$("${P[@]}" create --network none --device "$KIND=$name" --rootfs "$T/rootfs" /bin/true) ||
    fail "podman create --device $KIND=$name failed"
  out=$("${P[@]}" init "$id" 2>&1) || true
  case "$out" in *"CDI"*) fail "podman did not resolve $KIND=$name: $out" ;; esac
  cfg="$T/root/vfs-containers/$id/userdata/config.json"
  [ -f "$cfg" ] || fail "podman init wrote no config.json for $KIND=$name: $out"
  # shellcheck disable=SC2086
  if ! why=$(check_config "$cfg" $nodes); then fail "$KIND=$name: $why"; fi
  echo "ok: $KIND=$name"
  resolved=$((resolved + 1))
  "${P[@]}" rm -f "$id" >/dev/null
done <"$T/expect"
[ "$resolved" -eq 9 ] || fail "resolved $resolved names, expected 9"

# A name the spec does not define is refused by the consumer.
id=$("${P[@]}" create --network none --device "$KIND=99" --rootfs "$T/rootfs" /bin/true)
if out=$("${P[@]}" init "$id" 2>&1); then fail "podman accepted $KIND=99"; fi
case "$out" in
  *"unresolvable CDI devices $KIND=99"*) echo "ok: $KIND=99 refused: $out" ;;
  *) fail "unexpected error for $KIND=99: $out" ;;
esac
echo "PASS: podman resolved all $resolved names of $KIND"
