#!/usr/bin/env bash
# smoke.sh: boots one node from a base image built by build-base.sh with the
# docker flags a strandlab kind provider needs on a host whose capability
# bounding set lacks CAP_SYS_RESOURCE (so --privileged fails), waits for kind's
# readiness log line, checks the node, imports a FROM-scratch static Go
# binary into containerd and runs it with nested runc (overlayfs, native,
# --privileged). Removes everything it created. Needs docker and go.
#
# usage: smoke.sh [IMAGE]      (default strandlab-kind-base:dev)
set -euo pipefail
image=${1:-strandlab-kind-base:dev}
name=strandlab-kind-smoke-$$
hello=strandlab-kind-hello:smoke-$$
tmp=$(mktemp -d)
cleanup() {
  docker rm -f -v "$name" >/dev/null 2>&1 || true
  docker rmi "$hello" >/dev/null 2>&1 || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# --privileged minus CAP_SYS_RESOURCE; cgroup-rw (in the image) makes the
# cgroup v1 hierarchies writable. --network none: this test sends no traffic.
start=$(date +%s%N)
docker run -d --tty --init=false --restart=on-failure:1 \
  --cap-add ALL --cap-drop SYS_RESOURCE \
  --security-opt seccomp=unconfined --security-opt apparmor=unconfined \
  --security-opt systempaths=unconfined --device-cgroup-rule 'a *:* rwm' \
  --device /dev/kmsg --device /dev/fuse --cgroupns=private \
  --tmpfs /tmp --tmpfs /run -v /var -v /lib/modules:/lib/modules:ro \
  -e KIND_EXPERIMENTAL_CONTAINERD_SNAPSHOTTER=overlayfs \
  --network none --label strandlab.test=kind-offline \
  --hostname "$name" --name "$name" "$image" >/dev/null
ms() { echo $(( ($(date +%s%N) - start) / 1000000 )); }
v1='' mu=''
while (( $(ms) < 60000 )); do
  log=$(docker logs "$name" 2>&1)
  [[ -z $v1 ]] && grep -q 'detected cgroup v1' <<<"$log" && v1=$(ms)
  grep -qE 'Reached target .*Multi-User System' <<<"$log" && { mu=$(ms); break; }
  sleep 0.2
done
echo "detected cgroup v1: ${v1:-never} ms; Multi-User System: ${mu:-never} ms"
[[ -n $mu ]] || { docker logs "$name" 2>&1 | tail -20; exit 1; }

docker exec "$name" sh -c '
  echo "system: $(systemctl is-system-running)"
  ls -l /dev/kmsg
  echo "/sys: $(findmnt -no OPTIONS /sys)"
  echo "/var: $(stat -f -c %T /var)"
  echo "containerd: $(systemctl is-active containerd)"
  iptables --version'

mkdir -p "$tmp/hello"
printf 'package main\n\nimport "fmt"\n\nfunc main() { fmt.Println("hello from nested runc") }\n' >"$tmp/hello/main.go"
printf 'module hello\n\ngo 1.21\n' >"$tmp/hello/go.mod"
(cd "$tmp/hello" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -o hello .)
tar -C "$tmp/hello" -c hello | docker import - "$hello" >/dev/null
docker save "$hello" | docker exec -i "$name" ctr -n k8s.io images import --all-platforms --digests -
ref=docker.io/library/$hello
docker exec "$name" ctr -n k8s.io run --rm "$ref" t1 /hello
docker exec "$name" ctr -n k8s.io run --rm --snapshotter native "$ref" t2 /hello
docker exec "$name" ctr -n k8s.io run --rm --privileged "$ref" t3 /hello
echo ok
