#!/usr/bin/env bash
# Fetch the release manifests of Argo Workflows and Kueue that deploy/cluster/controllers/
# builds on, pinned by version, into deploy/cluster/vendor/ (not committed). Run it once on a
# machine with internet access; copy the repository with vendor/ to an air-gapped cluster.
#
#   deploy/vendor.sh            fetch, and check the sums in deploy/vendor.sha256 if present
#   deploy/vendor.sh --record   fetch, and write their sums into deploy/vendor.sha256
#
# Environment (for mirrors and tests): ARGO_URL, KUEUE_URL override the download addresses;
# VENDOR_DIR the target directory; SUMS_FILE the file of sums.
set -euo pipefail

ARGO_VERSION=v4.1.6
KUEUE_VERSION=v0.20.5

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vendor="${VENDOR_DIR:-$here/cluster/vendor}"
sums="${SUMS_FILE:-$here/vendor.sha256}"
argo_url="${ARGO_URL:-https://github.com/argoproj/argo-workflows/releases/download/$ARGO_VERSION/namespace-install.yaml}"
kueue_url="${KUEUE_URL:-https://github.com/kubernetes-sigs/kueue/releases/download/$KUEUE_VERSION/manifests.yaml}"

record=false
case "${1:-}" in
  "") ;;
  --record) record=true ;;
  *) echo "usage: $0 [--record]" >&2; exit 2 ;;
esac

# fetch URL DIR FILE VERSION: download into DIR/FILE and write DIR/kustomization.yaml naming it.
fetch() {
  local url="$1" dir="$2" file="$3" version="$4"
  mkdir -p "$dir"
  echo "fetching $url"
  curl --fail --silent --show-error --location --retry 3 --output "$dir/$file.part" "$url"
  mv "$dir/$file.part" "$dir/$file"
  printf '# Written by deploy/vendor.sh: %s, unchanged.\nresources:\n  - %s\n' \
    "$version" "$file" > "$dir/kustomization.yaml"
}

fetch "$argo_url" "$vendor/argo-workflows" namespace-install.yaml "Argo Workflows $ARGO_VERSION"
fetch "$kueue_url" "$vendor/kueue" manifests.yaml "Kueue $KUEUE_VERSION"

cd "$vendor"
files=(argo-workflows/namespace-install.yaml kueue/manifests.yaml)
if $record; then
  sha256sum "${files[@]}" > "$sums"
  echo "recorded the sums in $sums"
elif [[ -f "$sums" ]]; then
  sha256sum --check --strict "$sums"
else
  echo "no $sums: the sums were not checked (run with --record to keep them):"
  sha256sum "${files[@]}"
fi
echo "vendored Argo Workflows $ARGO_VERSION and Kueue $KUEUE_VERSION into $vendor"
