// Package shards renders the matrix of shards a CI workflow fans a run out
// to (docs/ci.md): shard i runs the scenario with seed firstSeed+i, and
// `strandlab merge` pools the shards' reports. The matrix is GitHub
// Actions' strategy.matrix shape, {"include": [{"shard": 0, "seed": ...}]},
// rendered by `strandlab shards` so that what the workflow runs is the
// code the unit tests check, not an inline script.
package shards

import (
	"fmt"
	"math"
)

// MaxShards is GitHub Actions' limit on the jobs one matrix may generate.
const MaxShards = 256

// Shard is one job of the matrix.
type Shard struct {
	// Index is the shard's number, 0 to n-1: it names the shard's artifact.
	Index int `json:"shard"`
	// Seed is the seed its run takes (`strandlab run --seed`).
	Seed int64 `json:"seed"`
}

// Matrix is a strategy.matrix with one include entry per shard.
type Matrix struct {
	Include []Shard `json:"include"`
}

// Render is the matrix of n shards with seeds firstSeed, firstSeed+1, ...:
// consecutive, hence distinct, so that no two shards repeat one sequence of
// actions. Errors begin with the name of the bad input as `strandlab
// shards` spells its flag.
func Render(n int, firstSeed int64) (Matrix, error) {
	switch {
	case n < 1:
		return Matrix{}, fmt.Errorf("shards: %d is below 1", n)
	case n > MaxShards:
		return Matrix{}, fmt.Errorf("shards: %d is more than the %d jobs GitHub Actions allows in one matrix", n, MaxShards)
	case firstSeed > math.MaxInt64-int64(n-1):
		return Matrix{}, fmt.Errorf("first-seed: %d + %d shards overflows a 64-bit seed", firstSeed, n)
	}
	m := Matrix{Include: make([]Shard, n)}
	for i := range n {
		m.Include[i] = Shard{Index: i, Seed: firstSeed + int64(i)}
	}
	return m, nil
}
