package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/strandlab/strandlab/internal/shards"
)

// shardsCommand is `strandlab shards`: the shard matrix of the CI workflows
// (internal/shards, docs/ci.md).
func shardsCommand() *cobra.Command {
	var (
		n         int
		firstSeed int64
	)
	cmd := &cobra.Command{
		Use:   "shards",
		Short: "Print the GitHub Actions matrix of N shards (one seed each) as JSON",
		Long: `Print, on one line, the strategy.matrix of N shards for a GitHub Actions
workflow: {"include":[{"shard":0,"seed":S},{"shard":1,"seed":S+1},...]}.
Shard i runs the scenario with seed S+i (--first-seed, default 0: the seed is
the shard's index), so no two shards repeat one sequence of actions; their
reports are pooled with strandlab merge. A setup job writes it to its
outputs, and the shard job reads it with
fromJSON(needs.<setup job>.outputs.matrix) (.github/workflows/shards.yml,
docs/ci.md). GitHub allows at most 256 jobs per matrix.`,
		Example: `  strandlab shards --shards 8
  strandlab shards --shards 4 --first-seed 1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return printShards(n, firstSeed, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.IntVar(&n, "shards", 0, fmt.Sprintf("number of shards, 1 to %d (required)", shards.MaxShards))
	f.Int64Var(&firstSeed, "first-seed", 0, "seed of shard 0; shard i takes first-seed + i")
	return cmd
}

// printShards writes the matrix of n shards to w as one line of JSON, as a
// $GITHUB_OUTPUT value must be.
func printShards(n int, firstSeed int64, w io.Writer) error {
	m, err := shards.Render(n, firstSeed)
	if err != nil {
		return fmt.Errorf("--%w", err)
	}
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}
