#!/usr/bin/env bash
# Installs what is missing, builds, and shows gpu-agent on this machine with
# the test doubles standing in for the GPUs: the libnvidia-ml stand-in
# driven by an example fixture.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)" --target gpu-agent fake_nvml fake-nvml-tool

work=$(mktemp -d /tmp/gpu-agent-demo.XXXXXX)
cleanup() { rm -rf "$work"; }
trap cleanup EXIT INT TERM

fixture=tests/fixtures/nvml/8-gpu-nvlink.yaml
./build/fake-nvml-tool sysfs "$fixture" "$work/sys"
export LD_LIBRARY_PATH="$PWD/build/fake-nvml" FAKE_NVML_FIXTURE="$PWD/$fixture"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "The GPUs NVML reports (the stand-in loaded through dlopen, fixture $fixture)"
./build/gpu-agent devices --sysfs-root "$work/sys"

step "The same as JSON (first GPU)"
./build/gpu-agent devices -o json --sysfs-root "$work/sys" | head -n 30

step "The effective config for config/time-slicing.yaml, with where each value came from"
MIG_STRATEGY=none ./build/gpu-agent config --config config/time-slicing.yaml --device-id-strategy index

step "A config mistake is reported with file:line:column"
printf 'version: v1\nflags:\n  migStrategy: singel\n' >"$work/bad.yaml"
./build/gpu-agent config --config "$work/bad.yaml" || echo "(exit code $?)"

step "Summary"
echo "gpu-agent found the fixture's 8 GPUs and their NVLink topology through the NVML stand-in,"
echo "and showed the effective config. Nothing is left behind (temp folder removed)."
