#!/usr/bin/env bash
# build.sh: builds the images of the programs strandlab runs inside a kind
# cluster, each FROM scratch with one static binary, without any registry:
#   csi-driver, apiproxy, pin-extender  (this module, CGO_ENABLED=0)
#   csi-attacher, csi-provisioner       (the pinned sidecars, tools/upstream/build.sh)
# Each image is tagged strandlab/<name>:<first 12 hex of the binary's sha256>
# and only built when that tag is missing. Prints "name=tag" per image on
# stdout; progress on stderr.
#
# usage: tools/images/build.sh OUTDIR     (OUTDIR: build outputs, _output)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
mkdir -p "${1:?usage: build.sh OUTDIR}"
out=$(cd "$1" && pwd)
command -v docker >/dev/null || { echo "images: docker not found" >&2; exit 1; }

bindir=$("$repo/tools/upstream/build.sh" "$out/bin" | tail -1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for name in csi-driver apiproxy pin-extender csi-attacher csi-provisioner; do
  ctx=$work/$name
  mkdir -p "$ctx"
  case $name in
    csi-attacher|csi-provisioner) cp "$bindir/$name" "$ctx/$name" ;;
    *) (cd "$repo" && CGO_ENABLED=0 go build -trimpath -ldflags '-s -w' -o "$ctx/$name" "./tools/$name") ;;
  esac
  cp "$here/$name/Dockerfile" "$ctx/Dockerfile"
  tag=strandlab/$name:$(sha256sum "$ctx/$name" | cut -c1-12)
  if ! docker image inspect "$tag" >/dev/null 2>&1; then
    echo ">> image $tag" >&2
    # The legacy builder: FROM scratch needs nothing from a registry, and it
    # is there on every Docker version (BuildKit may not be).
    # (its deprecation notice is dropped: it says nothing about this build)
    DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" 2>&1 >/dev/null | { grep -v -e DEPRECATED -e BuildKit -e 'environment-variable' -e '^$' >&2 || true; }
  fi
  echo "$name=$tag"
done
