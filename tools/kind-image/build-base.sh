#!/usr/bin/env bash
# build-base.sh: builds a kind-style node base image with no image registry:
# debootstrap a Debian bookworm minbase root (systemd, containerd, runc,
# iptables, ...) from an apt mirror, add kind's entrypoint (from the
# sigs.k8s.io/kind Go module) and cgroup-rw, `docker import` it, and set
# STOPSIGNAL with a one-line legacy `docker build` (docker 20.10's import
# rejects STOPSIGNAL). Experimental; see docs/kind-offline.md.
#
# usage: build-base.sh WORKDIR [TAG]     (run as root; WORKDIR is scratch)
# env:   MIRROR (default: the first Debian mirror this machine's apt uses), SUITE (bookworm),
#        KIND_VERSION (v0.33.0)
set -euo pipefail
work=${1:?usage: build-base.sh WORKDIR [TAG]}
tag=${2:-strandlab-kind-base:dev}
# The mirror apt is already configured with (deb822 .sources or a
# one-line sources.list), so the image comes from where this machine's
# packages come from.
apt_mirror() {
  { grep -hs '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}'
    grep -hs '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list | awk '{print $2}'; } | head -1
  return 0 # a missing sources file is not an error (pipefail)
}
mirror=${MIRROR:-$(apt_mirror)}
[[ -n $mirror ]] || { echo "build-base.sh: no apt mirror configured; set MIRROR" >&2; exit 1; }
suite=${SUITE:-bookworm}
kind_version=${KIND_VERSION:-v0.33.0}
here=$(cd "$(dirname "$0")" && pwd)
pkgs=systemd,systemd-sysv,dbus,containerd,runc,iptables,iproute2,kmod,procps,ca-certificates,containernetworking-plugins,conntrack,socat,ethtool,ebtables,util-linux,mount,jq

# debootstrap is a Debian package; a fresh machine may not have it yet.
if ! command -v debootstrap >/dev/null; then
  echo "build-base.sh: installing debootstrap (apt)" >&2
  apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >&2
fi
mkdir -p "$work"
root=$work/root
if [[ ! -x $root/sbin/init ]]; then
  start=$SECONDS
  debootstrap --variant=minbase --include="$pkgs" "$suite" "$root" "$mirror"
  echo "debootstrap: $((SECONDS - start)) s" >&2
fi
rm -f "$root"/var/cache/apt/archives/*.deb
rm -rf "$root"/var/lib/apt/lists/*

kind_dir=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@$kind_version" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
install -m 0755 "$kind_dir/images/base/files/usr/local/bin/entrypoint" "$root/usr/local/bin/entrypoint"
install -m 0755 "$here/cgroup-rw" "$root/usr/local/bin/cgroup-rw"
mkdir -p "$root/kind"

tar -C "$root" -c . | docker import \
  --change 'ENV container=docker' \
  --change 'ENTRYPOINT ["/usr/local/bin/cgroup-rw", "/usr/local/bin/entrypoint", "/sbin/init"]' \
  - "$tag-nostop"
ctx=$(mktemp -d)
printf 'FROM %s\nSTOPSIGNAL SIGRTMIN+3\n' "$tag-nostop" >"$ctx/Dockerfile"
DOCKER_BUILDKIT=0 docker build -q -t "$tag" "$ctx" >/dev/null
rm -rf "$ctx"
docker rmi "$tag-nostop" >/dev/null
echo "$tag"
