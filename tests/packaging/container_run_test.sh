#!/usr/bin/env bash
# The real binary as the no-runtime-hook DaemonSet runs it, without a
# container engine: a root filesystem made only of the files of the packages
# the image's runtime stage holds (the Dockerfile's list and debian:12-slim's
# libc, libstdc++, libgcc and zlib), entered with unshare --mount and chroot.
# A stand-in "host" folder holds the NVML stand-in, device nodes and the
# kubelet's folder; each hostPath of the rendered manifests/plugin/host-driver
# DaemonSet is bind-mounted from it where the DaemonSet mounts it, and the
# agent gets the DaemonSet's own args, env and ConfigMap. Passes when the
# agent finds NVML through that env, registers, and Allocate names the HOST's
# device paths.
#   container_run_test.sh SOURCE_DIR BUILD_DIR
# Exit 77 (skipped) when not root: unshare --mount --net and chroot need it.
set -euo pipefail
src=$1
build=$2

if [ "$(id -u)" -ne 0 ]; then
  echo "container_run_test: needs root for unshare --mount and chroot; skipped"
  exit 77
fi
if ! command -v kubectl >/dev/null; then
  if [ -n "${CI:-}" ]; then
    echo "container_run_test: no kubectl to render manifests/plugin/host-driver" >&2
    exit 1
  fi
  echo "container_run_test: no kubectl to render the manifests; skipped"
  exit 77
fi

work=$(mktemp -d /tmp/gpu-agent-container.XXXXXX)
pids=()
cleanup() {
  # SIGKILL: the kubelet simulator waits for its plugin with signals blocked.
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
rootfs=$work/rootfs
host=$work/host
fail() {
  echo "container_run_test: $*" >&2
  for f in "$work"/agent.log "$work"/sim.log; do
    [ -f "$f" ] && { echo "--- $f" >&2; cat "$f" >&2; }
  done
  exit 1
}
# Waits for `pattern` in `file`, 30 s at most.
wait_for() {
  local file=$1 pattern=$2 deadline=$((SECONDS + 30))
  until grep -q -- "$pattern" "$file" 2>/dev/null; do
    [ $SECONDS -lt $deadline ] || return 1
    sleep 0.05
  done
}

# 1. The image's root: only the files of its packages.
base="libc6 libgcc-s1 libstdc++6 zlib1g"
listed=$(sed -n '/runtime-packages-begin/,/runtime-packages-end/p' "$src/Dockerfile" |
  tr ' \\' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' |
  grep -vE '^(RUN|apt-get|update|install|rm|y|no|rf|runtime-packages-begin|runtime-packages-end)$')
mkdir -p "$rootfs"
for pkg in $base $listed; do
  dpkg -L "$pkg" >/dev/null 2>&1 || fail "package $pkg (the runtime stage's) is not installed here"
  dpkg -L "$pkg" | while read -r f; do
    # Files and links to files; folders (and /lib, a link to one) are made.
    if [ ! -d "$f" ] && { [ -L "$f" ] || [ -f "$f" ]; }; then
      mkdir -p "$rootfs$(dirname "$f")"
      cp -a "$f" "$rootfs$f"
    fi
  done
done
ldconfig -r "$rootfs" 2>/dev/null || true
install -D -m 0755 "$build/gpu-agent" "$rootfs/usr/bin/gpu-agent"
ln -s gpu-agent "$rootfs/usr/bin/nvidia-device-plugin"  # as the image has it
mkdir -p "$rootfs/proc" "$rootfs/tmp"

# 2. The host: the driver (the NVML stand-in, with the yaml-cpp it loads
#    beside it), device nodes, the kubelet's folder.
mkdir -p "$host/usr/lib64" "$host/dev" "$host/var/lib/kubelet/device-plugins"
cp -L "$build/fake-nvml/libnvidia-ml.so.1" "$host/usr/lib64/"
cp -L "$(ldd "$build/fake-nvml/libnvidia-ml.so.1" | awk '/libyaml-cpp/ {print $3}')" "$host/usr/lib64/"
for n in nvidiactl nvidia-uvm nvidia0 nvidia1 nvidia2 nvidia3 nvidia4 nvidia5 nvidia6 nvidia7; do
  : >"$host/dev/$n"
done
cp "$src/tests/fixtures/nvml/8-gpu-nvlink.yaml" "$host/fixture.yaml"

# 3. What the DaemonSet runs: args, env, mounts and the ConfigMap's files.
kubectl kustomize "$src/manifests/plugin/host-driver" >"$work/render.yaml" ||
  fail "kubectl kustomize manifests/plugin/host-driver failed"
python3 "$src/tests/packaging/daemonset_spec.py" "$work/render.yaml" "$work" ||
  fail "cannot read the rendered DaemonSet"
mounts=""
while read -r kind a b c; do
  case $kind in
    host)
      mkdir -p "$rootfs$b" "$host$a"
      mounts+="mount --bind $host$a $rootfs$b; "
      [ "$c" = ro ] && mounts+="mount -o remount,bind,ro $rootfs$b; "
      ;;
    file)
      install -D -m 0644 "$work/cm-$(basename "$a")" "$rootfs$a"
      ;;
  esac
done <"$work/mounts"
grep -q "^host / /driver-root ro" "$work/mounts" || fail "the DaemonSet does not mount the host's / read-only at /driver-root"

# 4. Run: the kubelet outside, the agent inside.
"$build/kubelet-sim" "$host/var/lib/kubelet/device-plugins" --allocate 2 >"$work/sim.log" 2>&1 &
pids+=($!)
wait_for "$work/sim.log" "serving" || fail "the kubelet simulator did not start"
env_args=$(cat "$work/env")
chroot_bin=$(command -v chroot)
args=$(cat "$work/args")
# A network namespace of its own, as a pod has: the DaemonSet's metrics port
# cannot clash with this machine's. Its address there is 127.0.0.1, which
# daemonset_spec.py puts for the pod's address (status.podIP) in the args.
unshare --mount --net --propagation private -- sh -c "
  ${mounts}
  mount -t proc proc $rootfs/proc
  exec env -i $env_args FAKE_NVML_FIXTURE=/driver-root/fixture.yaml \
    $chroot_bin $rootfs /usr/bin/gpu-agent $args --pass-device-specs
" >"$work/agent.log" 2>&1 &
pids+=($!)

wait_for "$work/sim.log" "plugin registered" || fail "the agent did not register from inside the root"
wait_for "$work/sim.log" "Allocate 2 -> " || fail "no Allocate answer"
grep -q "Allocate 2 -> OK" "$work/sim.log" || fail "Allocate failed"
line=$(grep "Allocate 2 -> OK" "$work/sim.log")
for path in /dev/nvidiactl /dev/nvidia-uvm /dev/nvidia0 /dev/nvidia1; do
  echo "$line" | grep -q "host_path: \"$path\"" || fail "Allocate does not name the host's $path"
done
if echo "$line" | grep -q "host_path: \"/driver-root"; then
  fail "Allocate names a path inside the agent's container: $line"
fi
grep -q "GPUs discovered" "$work/agent.log" || fail "the agent did not discover the GPUs"
echo "container_run_test: the agent in a runtime-stage root found NVML at /driver-root" \
  "(NVIDIA_DRIVER_ROOT=/, CONTAINER_DRIVER_ROOT=/driver-root), registered, and Allocate named" \
  "host paths:"
echo "$line" | grep -o 'host_path: "[^"]*"' | sort -u | tr '\n' ' '
echo
