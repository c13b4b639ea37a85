package kcmbuild

import (
	"bytes"
	"context"
	"os"
	"testing"
	"time"

	"github.com/strandlab/strandlab/internal/upstream"
)

// TestShippedBuilds runs every shipped build's own tests, together with
// upstream's tests of the packages it patches, against the patched copy of
// k8s.io/kubernetes, and builds its controller (cached afterwards). It
// compiles upstream packages, so -short skips it.
func TestShippedBuilds(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles k8s.io/kubernetes packages")
	}
	wd, _ := os.Getwd()
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	specs, err := List(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(specs) < 2 {
		t.Fatalf("found %d shipped builds, want at least fix and retry-empty-patch", len(specs))
	}
	for _, s := range specs {
		t.Run(s.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			var out bytes.Buffer
			if err := Test(ctx, root, s.Name, &out); err != nil {
				t.Fatalf("tests of build %s against the patched copy: %v\n%s", s.Name, err, out.String())
			}
			res, err := Build(ctx, root, s.Name, &out)
			if err != nil {
				t.Fatalf("build %s: %v\n%s", s.Name, err, out.String())
			}
			if res.Provenance.Patch != s.Name || len(res.Provenance.PatchSHA256) != 64 {
				t.Errorf("provenance %+v: want the patch name and its sha256", res.Provenance)
			}
		})
	}
}
