#!/usr/bin/env bash
# build-node.sh: builds strandlab's kind node image for the pinned Kubernetes
# version without any image registry (docs/kind.md, "The node image"):
#   - the base (build-base.sh: Debian root from debootstrap with Debian's
#     systemd, containerd, runc and CNI plugins, kind's entrypoint);
#   - kubelet, kubeadm and kubectl built from the pinned k8s.io/kubernetes
#     module (tools/upstream/build.sh), kind's systemd units and containerd
#     config (from the sigs.k8s.io/kind module), a bridge CNI config;
#   - the control-plane images kubeadm asks for (kube-apiserver,
#     kube-controller-manager, kube-scheduler, etcd) and the pause image, each
#     one layer holding one static binary, written as docker archives by this
#     script (no host image is tagged) and imported into the node's containerd.
# The image is tagged strandlab/kind-node:<k8s version>-<hash of the inputs>
# and rebuilt only when an input changes (a pin, these scripts, the pause
# program, the kind version).
#
# usage: build-node.sh OUTDIR       OUTDIR: build outputs (_output); prints
#                                   the image tag as its last line; progress
#                                   goes to stderr
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "${1:?usage: build-node.sh OUTDIR}"
out=$(cd "$1" && pwd)
say() { echo ">> kind node image: $*" >&2; }
command -v docker >/dev/null || { echo "build-node.sh: docker not found" >&2; exit 1; }

kind_version=$(cd "$repo" && go list -m -f '{{.Version}}' sigs.k8s.io/kind)
kind_dir=$(cd "$repo" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)
[[ -d $kind_dir ]] || kind_dir=$(cd "$repo" && go mod download -json sigs.k8s.io/kind | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
kind_files=$kind_dir/images/base/files

say "binaries (kubelet, kubeadm, kubectl, crictl and the control plane; minutes on a cold cache)"
bindir=$("$repo/tools/upstream/build.sh" "$out/bin" kubelet kubeadm kubectl crictl | tail -1)
k8s_version=$(sed -n 's/^kube-apiserver=//p' "$bindir/versions.txt")

base_key=$(cat "$here/build-base.sh" "$here/cgroup-rw" | sha256sum | cut -c1-12)
base=strandlab/kind-base:$base_key
key=$({ echo "$kind_version $base_key $(basename "$bindir")"; cat "$0" "$here/pause/main.go" "$bindir/versions.txt" "$repo/manifests/statefulset.yaml"; } | sha256sum | cut -c1-12)
tag=strandlab/kind-node:$k8s_version-$key
if docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag"
  exit 0
fi
start=$SECONDS

if ! docker image inspect "$base" >/dev/null 2>&1; then
  say "base $base (debootstrap: about 4 minutes)"
  KIND_VERSION=$kind_version "$here/build-base.sh" "$out/kind/base-$base_key" "$base" >/dev/null
fi

mkdir -p "$out/kind"
work=$(mktemp -d "$out/kind/node.XXXXXX")
builder=strandlab-kind-node-build-$$
cleanup() {
  docker rm -f -v "$builder" >/dev/null 2>&1 || true
  docker rmi "$tag-layout" "$tag-nostop" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT

say "pause"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$work/pause" ./tools/kind-image/pause)

# archive REF ENTRYPOINT_JSON FILE...: a docker-archive (docker save format)
# of one layer holding FILE... under /usr/local/bin, written to
# $work/root/kind/images/. Timestamps and owners are fixed, so the same
# binaries give the same image id.
archive() {
  local ref=$1 entrypoint=$2
  shift 2
  local d=$work/archive layer config diff name
  rm -rf "$d" && mkdir -p "$d/rootfs/usr/local/bin"
  cp "$@" "$d/rootfs/usr/local/bin/"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$d/rootfs" -cf "$d/layer.tar" .
  diff=$(sha256sum "$d/layer.tar" | cut -c1-64)
  mkdir -p "$d/$diff" && mv "$d/layer.tar" "$d/$diff/layer.tar"
  printf '{"architecture":"amd64","os":"linux","created":"1970-01-01T00:00:00Z","config":{"Env":["PATH=/usr/local/bin"],"Entrypoint":%s},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]}}' \
    "$entrypoint" "$diff" >"$d/config.json"
  config=$(sha256sum "$d/config.json" | cut -c1-64)
  mv "$d/config.json" "$d/$config.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["%s/layer.tar"]}]' "$config" "$ref" "$diff" >"$d/manifest.json"
  name=${ref##*/}
  tar -C "$d" -cf "$work/root/kind/images/${name//[:@]/_}.tar" manifest.json "$config.json" "$diff"
  rm -rf "$d"
}

say "control-plane and pause images"
mkdir -p "$work/root/kind/images"
sandbox=$(sed -n 's/^[[:space:]]*sandbox_image = "\(.*\)"/\1/p' "$kind_files/etc/containerd/config.toml")
refs=$("$bindir/kubeadm" config images list --kubernetes-version "$k8s_version" 2>/dev/null)
for ref in $refs; do
  name=${ref##*/}
  name=${name%%:*}
  case $name in
    kube-apiserver|kube-controller-manager|kube-scheduler|etcd)
      archive "$ref" "[\"/usr/local/bin/$name\"]" "$bindir/$name" ;;
    pause)
      archive "$ref" '["/usr/local/bin/pause"]' "$work/pause" ;;
    # kube-proxy and CoreDNS are not made: their kubeadm phases are skipped
    # (internal/cluster/kind renders the config; docs/kind.md says why).
    *) ;;
  esac
done
# containerd's sandbox_image (kind's config) and the workload's image
# (manifests/statefulset.yaml, the one place it is named) are the same
# pause under their own names, so that a kind or Kubernetes bump that moves
# a tag cannot turn every pod into a failed pull (no registry here).
workload_image=$(sed -n 's/^[[:space:]]*image:[[:space:]]*//p' "$repo/manifests/statefulset.yaml" | head -1)
[[ -n $workload_image ]] || { echo "build-node.sh: no image in manifests/statefulset.yaml" >&2; exit 1; }
for ref in "$sandbox" "$workload_image"; do
  [[ -z $ref ]] || grep -qxF "$ref" <<<"$refs" || archive "$ref" '["/usr/local/bin/pause"]' "$work/pause"
done

say "node root"
r=$work/root
install -D -m 0755 -t "$r/usr/bin" "$bindir/kubelet" "$bindir/kubeadm" "$bindir/kubectl"
install -D -m 0755 -t "$r/usr/local/bin" "$bindir/crictl"
(cd "$kind_files" && find etc kind -type f) | while read -r f; do
  case $f in
    *fuse-overlayfs*|kind/README.txt) continue ;;
  esac
  install -D -m "$([[ $f == kind/bin/* ]] && echo 0755 || echo 0644)" "$kind_files/$f" "$r/$f"
done
echo "$k8s_version" >"$r/kind/version"
# One bridge per node; pods of different nodes never talk to each other here
# (strandlab's in-cluster parts use the host network), so every node may use
# the same range. No masquerade and no portmap: no pod sends traffic off its
# node or maps a host port, and both plugins run iptables on every pod's
# sandbox set-up and tear-down, which the churn does tens of times a second
# (docs/performance.md, "kind").
install -D -m 0644 /dev/stdin "$r/etc/cni/net.d/10-strandlab-bridge.conflist" <<'CNI'
{
  "cniVersion": "1.0.0",
  "name": "strandlab",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/16"}]],
              "routes": [{"dst": "0.0.0.0/0"}]}}
  ]
}
CNI
cat >"$work/Dockerfile" <<'DOCKERFILE'
FROM BASE
COPY root/ /
# kind's units and config expect containerd under /usr/local/bin and the CNI
# plugins under /opt/cni/bin; Debian installs them under /usr/bin and /usr/lib/cni.
# SystemdCgroup = false: runc makes the containers' cgroups itself
# (cgroupfs), as the kubelet's cgroupDriver (internal/cluster/kind/config.go)
# says, instead of asking the node's systemd over D-Bus for each one.
# restrict_oom_score_adj: pods may not get an OOM score below containerd's
# own, as under rootless Docker: lowering it needs CAP_SYS_RESOURCE, which
# nodes started without --privileged may lack (docs/kind-offline.md), and
# runc then fails every sandbox ("can't get final child's PID from pipe").
# cri-base.json without kind's mount-product-files.sh createContainer hook:
# the hook gives each container its node's product_uuid and product_name
# (bash, jq, cp and up to three bind mounts in every container's create),
# which no container here reads; without it a kind cycle took 23% less
# CPU (docs/performance.md, "kind").
RUN ln -sf /usr/bin/containerd /usr/local/bin/containerd \
 && mkdir -p /opt/cni /etc/kubernetes/manifests && ln -sfn /usr/lib/cni /opt/cni/bin \
 && sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' /etc/containerd/config.toml \
 && sed -i 's/SystemdCgroup = true/SystemdCgroup = false/' /etc/containerd/config.toml \
 && ctr oci spec | jq 'del(.process.rlimits)' >/etc/containerd/cri-base.json \
 && systemctl enable kubelet.service containerd.service undo-mount-hacks.service \
 && systemctl mask systemd-binfmt.service
DOCKERFILE
sed -i "s|^FROM BASE|FROM $base|" "$work/Dockerfile"
DOCKER_BUILDKIT=0 docker build -q -t "$tag-layout" "$work" >/dev/null

say "preloading the images into the node's containerd"
# The same capabilities as a node (docs/kind-offline.md), without systemd:
# containerd runs for the import only.
docker run -d --name "$builder" --cap-add ALL --cap-drop SYS_RESOURCE \
  --security-opt seccomp=unconfined --security-opt systempaths=unconfined \
  --tmpfs /tmp --tmpfs /run --entrypoint /bin/sleep "$tag-layout" infinity >/dev/null
docker exec "$builder" bash -euc '
  containerd >/tmp/containerd.log 2>&1 &
  for _ in $(seq 100); do ctr version >/dev/null 2>&1 && break; sleep 0.1; done
  for t in /kind/images/*.tar; do
    ctr -n k8s.io images import --all-platforms --digests --snapshotter=overlayfs "$t" >/dev/null
  done
  # --digests also names each image import-<date>@sha256:..., and ctr
  # lists images by config digest too; only the references are the images.
  refs=$(ctr -n k8s.io images ls -q | grep -v -e "^import-" -e "^sha256:")
  for ref in $refs; do
    ctr -n k8s.io images label "$ref" io.cri-containerd.pinned=pinned >/dev/null
  done
  echo "$refs" >/kind/images/preloaded.txt
  kill %1; wait %1 || true
  rm -f /kind/images/*.tar'
docker commit \
  --change 'ENV container=docker' \
  --change 'ENTRYPOINT ["/usr/local/bin/cgroup-rw", "/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change 'CMD []' \
  "$builder" "$tag-nostop" >/dev/null
# docker 20.10's commit and import take no STOPSIGNAL; a one-line legacy build does.
printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$tag-nostop" | DOCKER_BUILDKIT=0 docker build -q -t "$tag" - >/dev/null
say "built $tag in $((SECONDS - start)) s"
echo "$tag"
