package shards

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestRender(t *testing.T) {
	tests := []struct {
		name      string
		n         int
		firstSeed int64
	}{
		{"one shard", 1, 0},
		{"seed = shard index", 8, 0},
		{"an offset", 20, 1000},
		{"negative seeds are seeds", 3, -1},
		{"GitHub's limit", MaxShards, 0},
		{"the last seeds", 4, math.MaxInt64 - 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Render(tc.n, tc.firstSeed)
			if err != nil {
				t.Fatal(err)
			}
			if len(m.Include) != tc.n {
				t.Fatalf("%d shards, want %d", len(m.Include), tc.n)
			}
			seeds := map[int64]bool{}
			for i, s := range m.Include {
				if s.Index != i {
					t.Errorf("include[%d].shard = %d", i, s.Index)
				}
				if s.Seed != tc.firstSeed+int64(i) {
					t.Errorf("include[%d].seed = %d, want %d", i, s.Seed, tc.firstSeed+int64(i))
				}
				if seeds[s.Seed] {
					t.Errorf("seed %d given twice", s.Seed)
				}
				seeds[s.Seed] = true
			}
		})
	}
}

// The JSON is what the workflow's fromJSON reads: strategy.matrix's shape.
func TestRenderJSON(t *testing.T) {
	m, err := Render(3, 10)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"include":[{"shard":0,"seed":10},{"shard":1,"seed":11},{"shard":2,"seed":12}]}`
	if string(got) != want {
		t.Errorf("%s\nwant %s", got, want)
	}
}

func TestRenderRefuses(t *testing.T) {
	tests := []struct {
		name      string
		n         int
		firstSeed int64
		want      string
	}{
		{"no shards", 0, 0, "shards: 0 is below 1"},
		{"negative", -2, 0, "shards: -2 is below 1"},
		{"more than a matrix holds", MaxShards + 1, 0, "shards: 257 is more than the 256 jobs"},
		{"seeds past int64", 2, math.MaxInt64, "first-seed: 9223372036854775807 + 2 shards overflows"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Render(tc.n, tc.firstSeed)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
