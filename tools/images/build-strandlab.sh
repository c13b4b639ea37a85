#!/usr/bin/env bash
# build-strandlab.sh: builds the strandlab image, FROM scratch and without
# any registry: the strandlab binary with every binary a local cluster runs
# (the pinned upstream ones, strandlab's own, and the kube-controller-manager
# of each controller build named), so that `strandlab run` works in a pod
# with no go command and no privileges (docs/soak-job.md).
#
# Tagged strandlab/strandlab:<first 12 hex of the sha256 of the image's
# files> and only built when that tag is missing. Prints "strandlab=<tag>"
# on stdout; progress on stderr.
#
# usage: tools/images/build-strandlab.sh OUTDIR [BUILD...]
#   OUTDIR: build outputs (_output); BUILD: controller builds to include
#   besides stock (directories of tools/upstream/builds; default: fix)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "${1:?usage: build-strandlab.sh OUTDIR [BUILD...]}"
out=$(cd "$1" && pwd)
shift
builds=("${@:-fix}")
command -v docker >/dev/null || { echo "image: docker not found" >&2; exit 1; }

bindir=$("$repo/tools/upstream/build.sh" "$out/bin" | tail -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
uid=65532

# The strandlab binary first: it builds the controller builds below.
own=$work/strandlab
mkdir -p "$own/usr/local/bin" "$own/strandlab/_output/bin/prebuilt" "$own/strandlab/tools/upstream"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$own/usr/local/bin/strandlab" ./tools/strandlab)

# pinned/: the upstream binaries of a local cluster and their versions; the
# user the image runs as; /tmp and /reports writable by anyone (sticky).
pinned=$work/pinned
prebuilt=strandlab/_output/bin/prebuilt
mkdir -p "$pinned/$prebuilt" "$pinned/etc" "$pinned/tmp" "$pinned/reports"
chmod 1777 "$pinned/tmp" "$pinned/reports"
printf 'root:x:0:0:root:/root:/sbin/nologin\nstrandlab:x:%d:%d:strandlab:/tmp:/sbin/nologin\n' $uid $uid >"$pinned/etc/passwd"
printf 'root:x:0:\nstrandlab:x:%d:\n' $uid >"$pinned/etc/group"
declare -A version
while IFS='=' read -r name v; do version[$name]=$v; done <"$bindir/versions.txt"
: >"$work/versions.txt"
for name in etcd kube-apiserver kube-controller-manager kube-scheduler csi-attacher csi-provisioner; do
  cp "$bindir/$name" "$pinned/$prebuilt/$name"
  echo "$name=${version[$name]}" >>"$work/versions.txt"
done
# strandlab's own binaries: from tools/upstream/build.sh's directory when it
# builds (and lists) one, else from this module.
for name in kubelet-sim csi-driver pin-extender apiproxy; do
  if [ -n "${version[$name]:-}" ]; then
    cp "$bindir/$name" "$own/$prebuilt/$name"
    echo "$name=${version[$name]}" >>"$work/versions.txt"
  else
    (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$own/$prebuilt/$name" "./tools/$name")
  fi
done
cp "$work/versions.txt" "$own/$prebuilt/versions.txt"

# kcm/: each controller build, built (or found cached) by internal/kcmbuild,
# at the path it caches it under relative to the repository root.
kcm=$work/kcm
for b in "${builds[@]}"; do
  [ "$b" = stock ] && continue
  binary=$(cd "$repo" && "$own/usr/local/bin/strandlab" kcm build "$b" | tail -1)
  rel=${binary#"$repo"/}
  mkdir -p "$kcm/strandlab/$(dirname "$rel")"
  cp "$binary" "$kcm/strandlab/$rel"
  cp "$(dirname "$binary")/provenance.json" "$kcm/strandlab/$(dirname "$rel")/"
done
mkdir -p "$kcm/strandlab"

# The repository files a run reads: go.mod marks the root (upstream.RepoRoot).
cp "$repo/go.mod" "$own/strandlab/go.mod"
cp -r "$repo/scenarios" "$own/strandlab/scenarios"
cp -r "$repo/tools/upstream/builds" "$own/strandlab/tools/upstream/builds"
cp "$here/strandlab/Dockerfile" "$work/Dockerfile"

# The tag: the files, their paths and modes, not their times.
tag=strandlab/strandlab:$(tar -C "$work" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -c pinned kcm strandlab Dockerfile | sha256sum | cut -c1-12)
if ! docker image inspect "$tag" >/dev/null 2>&1; then
  echo ">> image $tag" >&2
  # The legacy builder, as tools/images/build.sh: FROM scratch needs no
  # registry (its deprecation notice is dropped).
  DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$work" 2>&1 >/dev/null | { grep -v -e DEPRECATED -e BuildKit -e 'environment-variable' -e '^$' >&2 || true; }
fi
echo "strandlab=$tag"
