#!/usr/bin/env bash
# NVIDIA's Helm chart layout, without a container engine: the host's driver
# root (here the GPU operator's /run/nvidia/driver, with its dev/ beside the
# libraries) bind-mounted read-only at /driver-root in a root made of the
# binary and the libraries it loads, entered with unshare --mount and chroot.
# The agent gets only what NVIDIA's chart sets, NVIDIA_DRIVER_ROOT (the host
# path), and runs under NVIDIA's program name. Passes when it finds NVML at
# /driver-root by default, registers, Allocate's device specs name the host's
# <root>/dev/nvidiaN, and `cdi generate` in the same root names host paths.
#   nvidia_chart_layout_test.sh SOURCE_DIR BUILD_DIR
# Exit 77 (skipped) when not root: unshare --mount and chroot need it.
set -euo pipefail
src=$1
build=$2

if [ "$(id -u)" -ne 0 ]; then
  echo "nvidia_chart_layout_test: needs root for unshare --mount and chroot; skipped"
  exit 77
fi

work=$(mktemp -d /tmp/gpu-agent-chart.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
rootfs=$work/rootfs
host=$work/host
driver=/run/nvidia/driver # the host path NVIDIA_DRIVER_ROOT names
fail() {
  echo "nvidia_chart_layout_test: $*" >&2
  for f in "$work"/agent.log "$work"/sim.log "$work"/cdi.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
  done
  exit 1
}
wait_for() {
  local file=$1 pattern=$2 deadline=$((SECONDS + 30))
  until grep -q -- "$pattern" "$file" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}
# Copies a file and the shared libraries it needs into the root.
copy_with_libs() {
  local f
  for f in "$1" $(ldd "$1" | awk '/=> \// {print $3} /ld-linux/ && !/=>/ {print $1}'); do
    mkdir -p "$rootfs$(dirname "$f")"
    cp -L "$f" "$rootfs$f"
  done
}

# 1. The container's root: the binary under NVIDIA's name, its libraries.
mkdir -p "$rootfs/usr/bin" "$rootfs/proc" "$rootfs/tmp" "$rootfs/driver-root" \
  "$rootfs/var/lib/kubelet/device-plugins"
copy_with_libs "$build/gpu-agent"
install -m 0755 "$build/gpu-agent" "$rootfs/usr/bin/gpu-agent"
ln -s gpu-agent "$rootfs/usr/bin/nvidia-device-plugin"

# 2. The host: a containerised driver under /run/nvidia/driver (NVML
#    stand-in, its yaml-cpp, the libraries CDI names, device nodes).
root=$host$driver
mkdir -p "$root/usr/lib64" "$root/dev" "$host/var/lib/kubelet/device-plugins"
cp -L "$build/fake-nvml/libnvidia-ml.so.1" "$root/usr/lib64/"
cp -L "$(ldd "$build/fake-nvml/libnvidia-ml.so.1" | awk '/libyaml-cpp/ {print $3}')" "$root/usr/lib64/"
version=550.54.15
for lib in libnvidia-ml libcuda; do
  : >"$root/usr/lib64/$lib.so.$version"
done
ln -sf "libcuda.so.$version" "$root/usr/lib64/libcuda.so.1"
for n in nvidiactl nvidia-uvm nvidia0 nvidia1 nvidia2 nvidia3 nvidia4 nvidia5 nvidia6 nvidia7; do
  : >"$root/dev/$n"
done
cp "$src/tests/fixtures/nvml/8-gpu-nvlink.yaml" "$root/fixture.yaml"
mounts="mount --bind $root $rootfs/driver-root; mount -o remount,bind,ro $rootfs/driver-root; "
mounts+="mount --bind $host/var/lib/kubelet/device-plugins $rootfs/var/lib/kubelet/device-plugins; "
chroot_bin=$(command -v chroot)
env_args="NVIDIA_DRIVER_ROOT=$driver FAKE_NVML_FIXTURE=/driver-root/fixture.yaml"

# 3. `cdi generate` as NVIDIA's chart layout sees the driver.
unshare --mount --propagation private -- sh -c "
  ${mounts}
  exec env -i $env_args $chroot_bin $rootfs /usr/bin/gpu-agent cdi generate -o json \
    --nvidia-cdi-hook-path \"\"
" >"$work/cdi.json" 2>"$work/cdi.log" || fail "cdi generate failed under NVIDIA's chart layout"
grep -q "\"hostPath\":\"$driver/dev/nvidia0\"" "$work/cdi.json" ||
  grep -q "\"hostPath\": *\"$driver/dev/nvidia0\"" "$work/cdi.json" ||
  fail "the CDI spec does not name the host's $driver/dev/nvidia0: $(cat "$work/cdi.json")"
if grep -q '"hostPath": *"/driver-root' "$work/cdi.json"; then
  fail "the CDI spec names a path inside the agent's container"
fi

# 4. Run: the kubelet outside, the agent inside, with NVIDIA's name.
"$build/kubelet-sim" "$host/var/lib/kubelet/device-plugins" --allocate 2 >"$work/sim.log" 2>&1 &
pids+=($!)
wait_for "$work/sim.log" "serving" || fail "the kubelet simulator did not start"
unshare --mount --net --propagation private -- sh -c "
  ${mounts}
  mount -t proc proc $rootfs/proc
  exec env -i $env_args $chroot_bin $rootfs /usr/bin/nvidia-device-plugin --pass-device-specs
" >"$work/agent.log" 2>&1 &
pids+=($!)

wait_for "$work/sim.log" "plugin registered" || fail "the agent did not register"
wait_for "$work/sim.log" "Allocate 2 -> " || fail "no Allocate answer"
line=$(grep "Allocate 2 -> OK" "$work/sim.log") || fail "Allocate failed"
for path in /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia0 /dev/nvidia1; do
  echo "$line" | grep -q "host_path: \"$driver$path\"" ||
    fail "Allocate does not name the host's $driver$path: $line"
done
grep -q "/driver-root exists (NVIDIA's Helm chart layout)" "$work/agent.log" ||
  grep -q "GPUs discovered" "$work/agent.log" || fail "the agent did not discover the GPUs"
echo "nvidia_chart_layout_test: with only NVIDIA_DRIVER_ROOT=$driver and the host's driver" \
  "root at /driver-root, the agent found NVML there, and Allocate and the CDI spec named" \
  "host paths:"
echo "$line" | grep -o 'host_path: "[^"]*"' | sort -u | tr '\n' ' '
echo
