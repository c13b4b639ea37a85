package report

import (
	"encoding/json"
	"testing"
)

// FuzzDecode: no input makes Decode panic, and what it accepts encodes and
// decodes again.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"schema_version": 1, "scenario": "s", "builds": [{"name": "stock", "cycles": 3, "stranded": 1}]}`))
	f.Add([]byte(`{"builds": [{"name": "fix", "runtime_ops": {"run_podsandbox": {"count": 1, "histogram": {"buckets": [{"le": 0.1, "count": 1}]}}}}]}`))
	f.Add([]byte(`{"schema_version": 2}`))
	f.Add([]byte(`{} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			return
		}
		again, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("an accepted report does not encode: %v", err)
		}
		if _, err := Decode(again); err != nil {
			t.Errorf("an accepted report, encoded, is refused: %v\n%s", err, again)
		}
	})
}
