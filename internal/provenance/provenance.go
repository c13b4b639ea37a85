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

// Run says what a run's figures rest on besides its components: the
// harness that measured, the scenario file's content and the machine, so
// that a merge pools only runs that measured the same thing (and says when
// they ran on different machines).
type Run struct {
	// Harness is the strandlab build: its VCS revision, "+modified" when
	// built from a tree with changes, or "unknown" (a build without VCS
	// information, e.g. go run).
	Harness string `json:"harness"`
	// ScenarioSHA256 is the sha256 of the scenario file as read (before
	// the command line's overrides, which the report records apart:
	// seed, builds, cycles, provider).
	ScenarioSHA256 string `json:"scenario_sha256"`
	// Machine describes the machine: an id that names no host (a hash of
	// its machine id), its CPUs and memory.
	Machine Machine `json:"machine"`
}

// Machine is the machine a run measured on.
type Machine struct {
	// ID is the first 12 hex digits of the sha256 of /etc/machine-id
	// (or of the host name where there is none): equal on one machine,
	// meaningless elsewhere.
	ID        string  `json:"id"`
	CPUs      int     `json:"cpus"`
	MemoryGiB float64 `json:"memory_gib"`
	CPUModel  string  `json:"cpu_model,omitempty"`
}
