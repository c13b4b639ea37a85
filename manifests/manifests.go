// Package manifests embeds the Kubernetes manifests strandlab applies, so the
// harness and a user with kubectl use the very same objects.
package manifests

import _ "embed"

// StatefulSet is manifests/statefulset.yaml.
//
//go:embed statefulset.yaml
var StatefulSet []byte
