#!/usr/bin/env bash
# Builds the pinned upstream binaries strandlab runs, each from the module
# that pins it under tools/upstream/:
#   kubernetes/       etcd, kube-apiserver, kube-controller-manager, kube-scheduler
#   csi-attacher/     the external-attacher sidecar
#   csi-provisioner/  the external-provisioner sidecar
#   kubelet-sim/      strandlab's simulated kubelet, on upstream's volume
#                     manager (pinned like kubernetes/)
# into OUTDIR/<hash of the pins>/, so a binary is rebuilt only when a pin
# changes; kubelet-sim, strandlab's own code, also when its sources change. A build is written under a temporary name and renamed, so an
# interrupted build never leaves a binary that looks complete; the temporary
# names carry the process id, so two builds at once (make binaries and a
# test package that ensures the binaries) each rename a whole binary.
#
# and, when named after OUTDIR, the node binaries of the kind node image
# (kubelet, kubeadm, kubectl from kubernetes/; crictl from cri-tools/;
# tools/kind-image/build-node.sh asks for them).
#
# Usage: tools/upstream/build.sh OUTDIR [kubelet|kubeadm|kubectl|crictl ...]
# Prints the directory holding the binaries as its last line (stdout);
# progress goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "${1:?usage: build.sh OUTDIR}"
out=$(cd "$1" && pwd)

# version MODULEDIR MODULE: the version MODULEDIR/go.mod requires of MODULE.
version() {
  (cd "$here/$1" && go list -m -f '{{.Version}}' "$2")
}

k8s_version=$(version kubernetes k8s.io/kubernetes)
etcd_version=$(version kubernetes go.etcd.io/etcd/server/v3)
attacher_version=$(version csi-attacher github.com/kubernetes-csi/external-attacher/v4)
provisioner_version=$(version csi-provisioner github.com/kubernetes-csi/external-provisioner/v6)
crictl_version=$(version cri-tools sigs.k8s.io/cri-tools)

pinned_modules=(kubernetes csi-attacher csi-provisioner cri-tools)
key=$(for m in "${pinned_modules[@]}"; do cat "$here/$m/go.mod" "$here/$m/go.sum"; done | cat - "$0" | sha256sum | cut -c1-16)
dir="$out/$key"
mkdir -p "$dir"

# The -X flags stamp the version the binaries report (/version, --version);
# without them a module build reports v0.0.0-master.
vpkg=k8s.io/component-base/version
k8s_ldflags="-s -w -X $vpkg.gitVersion=$k8s_version -X $vpkg.gitMajor=1 -X $vpkg.gitMinor=$(echo "$k8s_version" | cut -d. -f2) -X $vpkg.gitTreeState=clean -X $vpkg.buildDate=1970-01-01T00:00:00Z"

build() { # name moduledir package ldflags
  local name=$1 moddir=$2 pkg=$3 flags=$4
  # Quiet when cached: a run ensures these more than once.
  [ -x "$dir/$name" ] && return
  echo ">> building $name from $pkg (this can take minutes on a cold cache)" >&2
  local start=$SECONDS
  (cd "$here/$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "$flags" -o "$dir/.$name.tmp.$$" "$pkg")
  mv "$dir/.$name.tmp.$$" "$dir/$name"
  echo ">> $name built in $((SECONDS - start))s" >&2
}

build etcd kubernetes go.etcd.io/etcd/server/v3 "-s -w"
build kube-apiserver kubernetes k8s.io/kubernetes/cmd/kube-apiserver "$k8s_ldflags"
build kube-controller-manager kubernetes k8s.io/kubernetes/cmd/kube-controller-manager "$k8s_ldflags"
build kube-scheduler kubernetes k8s.io/kubernetes/cmd/kube-scheduler "$k8s_ldflags"
build csi-attacher csi-attacher github.com/kubernetes-csi/external-attacher/v4/cmd/csi-attacher "-s -w -X main.version=$attacher_version"
build csi-provisioner csi-provisioner github.com/kubernetes-csi/external-provisioner/v6/cmd/csi-provisioner "-s -w -X main.version=$provisioner_version"
# kubelet-sim changes with strandlab, not with a pin: it is kept under a
# name keyed by its own sources and linked to kubelet-sim by an atomic
# rename, so a running cluster keeps the binary it started with.
ksim_key=$(cd "$here/kubelet-sim" && find . \( -name '*.go' -not -name '*_test.go' \) -o -name go.mod -o -name go.sum -o -name '*.json' | LC_ALL=C sort | xargs cat | sha256sum | cut -c1-16)
build "kubelet-sim.$ksim_key" kubelet-sim github.com/strandlab/strandlab/tools/upstream/kubelet-sim "$k8s_ldflags"
if ! [ "$dir/kubelet-sim" -ef "$dir/kubelet-sim.$ksim_key" ]; then
  ln -f "$dir/kubelet-sim.$ksim_key" "$dir/.kubelet-sim.link.$$"
  mv -f "$dir/.kubelet-sim.link.$$" "$dir/kubelet-sim"
  find "$dir" -maxdepth 1 -name 'kubelet-sim.*' -not -name "kubelet-sim.$ksim_key" -delete
fi
for node_binary in "${@:2}"; do
  case $node_binary in
    kubelet|kubeadm|kubectl) build "$node_binary" kubernetes "k8s.io/kubernetes/cmd/$node_binary" "$k8s_ldflags" ;;
    crictl) build crictl cri-tools sigs.k8s.io/cri-tools/cmd/crictl "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$crictl_version" ;;
    *) echo "build.sh: unknown node binary $node_binary (want kubelet, kubeadm, kubectl or crictl)" >&2; exit 2 ;;
  esac
done

cat > "$dir/.versions.tmp.$$" <<VERS
etcd=$etcd_version
kube-apiserver=$k8s_version
kube-controller-manager=$k8s_version
kube-scheduler=$k8s_version
csi-attacher=$attacher_version
csi-provisioner=$provisioner_version
kubelet-sim=$k8s_version
VERS
for node_binary in kubelet kubeadm kubectl; do
  [ -x "$dir/$node_binary" ] && echo "$node_binary=$k8s_version" >>"$dir/.versions.tmp.$$"
done
[ -x "$dir/crictl" ] && echo "crictl=$crictl_version" >>"$dir/.versions.tmp.$$"
mv "$dir/.versions.tmp.$$" "$dir/versions.txt"
echo "$dir"
