package runprovenance

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

func TestOf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.yaml")
	content := []byte("name: s\n")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	rp, err := Of(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(content)
	if rp.ScenarioSHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("scenario_sha256 %s, want the file's sha256", rp.ScenarioSHA256)
	}
	// A test binary has no VCS stamp: "unknown", or a revision when it has.
	if !regexp.MustCompile(`^(unknown|[0-9a-f]{7,64}(\+modified)?)$`).MatchString(rp.Harness) {
		t.Errorf("harness %q, want a revision or unknown", rp.Harness)
	}
	m := rp.Machine
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(m.ID) || m.CPUs < 1 {
		t.Errorf("machine %+v, want a 12-hex-digit id and at least one CPU", m)
	}
	if again := ThisMachine(); again.ID != m.ID {
		t.Errorf("the machine id changed between reads: %s, %s", m.ID, again.ID)
	}
	if _, err := Of(filepath.Join(t.TempDir(), "none.yaml")); err == nil {
		t.Error("a missing scenario file gave no error")
	}
}
