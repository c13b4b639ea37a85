#!/usr/bin/env bash
# Builds the pinned upstream binaries (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) from the Go modules named in
# tools/upstream/go.mod into a cache directory keyed by the pins, so a binary is
# rebuilt only when a pin changes.
#
# Usage: tools/upstream/build.sh OUTDIR
# Prints the directory holding the binaries as its last line.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "${1:?usage: build.sh OUTDIR}"
out=$(cd "$1" && pwd)

k8s_version=$(awk '$1=="k8s.io/kubernetes" && $2 ~ /^v/ {print $2; exit}' "$here/go.mod")
[ -n "$k8s_version" ] || k8s_version=$(grep -Eo 'k8s.io/kubernetes v[0-9.]+' "$here/go.mod" | head -1 | cut -d' ' -f2)
etcd_version=$(grep -Eo 'go.etcd.io/etcd/server/v3 v[0-9.]+' "$here/go.mod" | head -1 | cut -d' ' -f2)
key=$(cat "$here/go.mod" "$here/go.sum" "$0" | sha256sum | cut -c1-16)
dir="$out/$key"
mkdir -p "$dir"

# The -X flags stamp the version the binaries report (/version, --version);
# without them a module build reports v0.0.0-master.
vpkg=k8s.io/component-base/version
ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(echo "$k8s_version" | cut -d. -f2) -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"

build() { # name package [extra ldflags]
  local name=$1 pkg=$2 flags=$3
  if [ -x "$dir/$name" ]; then
    echo ">> $name: cached ($dir/$name)" >&2
    return
  fi
  echo ">> building $name from $pkg (this can take minutes on a cold cache)" >&2
  local start=$SECONDS
  # Build to a temporary name and rename, so an interrupted build never
  # leaves a binary that looks complete.
  (cd "$here" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$dir/.$name.tmp" "$pkg")
  mv "$dir/.$name.tmp" "$dir/$name"
  echo ">> $name built in $((SECONDS - start))s" >&2
}

build etcd go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$ldflags"
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$ldflags"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$ldflags"

cat > "$dir/versions.txt" <<VERS
etcd=$etcd_version
kube-apiserver=$k8s_version
kube-controller-manager=$k8s_version
kube-scheduler=$k8s_version
VERS
echo "$dir"
