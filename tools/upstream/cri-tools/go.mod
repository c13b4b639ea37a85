// Pins crictl (sigs.k8s.io/cri-tools), built by ../build.sh for the kind
// node image: kind collects the nodes' logs with it, and a user debugging a
// node expects it there.
module github.com/strandlab/strandlab/tools/upstream/cri-tools

go 1.26.6

require sigs.k8s.io/cri-tools v1.37.0
