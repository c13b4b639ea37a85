package scenario

import (
	"os"
	"testing"
)

// FuzzParse: no input makes Parse panic, and whatever it accepts is a
// valid scenario (Validate agrees, the name is a name).
func FuzzParse(f *testing.F) {
	for _, p := range shippedScenarios(f) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(valid))
	f.Add([]byte(valid + "---\n" + valid))
	f.Add([]byte("name: \"a\\nb\"\n" + valid))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse(data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Errorf("Parse accepted a scenario Validate refuses: %v", err)
		}
		if s.Name != "" {
			if err := ValidName(s.Name); err != nil {
				t.Errorf("Parse accepted name %q: %v", s.Name, err)
			}
		}
	})
}
