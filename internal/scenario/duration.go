package scenario

import (
	"encoding/json"
	"fmt"
	"time"
)

const (
	defaultCycleTimeout = 2 * time.Minute
	minCycleTimeout     = time.Second
	maxCycleTimeout     = time.Hour
)

// durationValue accepts Go duration strings ("30s", "1m30s") in YAML.
type durationValue struct{ time.Duration }

func (d *durationValue) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

func (d durationValue) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }
