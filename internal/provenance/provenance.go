// Package provenance says exactly which binaries a run used: every real
// component a cluster ran, and which kube-controller-manager a controller
// build is. The cluster seam, the controller builds and the report share
// these types, so a report names what ran without importing the code that
// ran it (docs/design.md, "Packages").
package provenance

// Component is one real binary a cluster runs.
type Component struct {
	// Name keys the report's components map, so it is not repeated inside.
	Name    string `json:"-"`
	Version string `json:"version"`
	// Provenance says how it was obtained, e.g. the Go module it was built
	// from.
	Provenance string `json:"provenance,omitempty"`
}

// ControllerBuild says exactly which kube-controller-manager a build is:
// the module it was built from and, for a patched build, the patch's name
// and sha256.
type ControllerBuild struct {
	Module      string `json:"module"`
	Patch       string `json:"patch,omitempty"`
	PatchSHA256 string `json:"patch_sha256,omitempty"`
}
