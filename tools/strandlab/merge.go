package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/internal/upstream"
)

// mergeCommand is `strandlab merge`: reports of one scenario pooled into one
// (internal/report/merge.go, docs/report.md "Merged reports").
func mergeCommand() *cobra.Command {
	var (
		output       string
		allowPartial bool
	)
	cmd := &cobra.Command{
		Use:   "merge REPORT_DIR...",
		Short: "Pool reports of one scenario and the same builds across runs, seeds and machines",
		Long: `Pool the reports of several runs of one scenario into one report of the same
schema, written like a run's: <output>/reports/<UTC time>-merge-<scenario>/
report.{json,md}, compare.{md,png}, copied to reports/latest/. Each argument
is a report directory or a report.json. Counts are summed and the rates,
intervals and tests recomputed from them; see docs/report.md for the rest.

Refused, with nothing written (exit 1): reports of different scenarios,
providers, Kubernetes or component versions, a build whose provenance
differs between two reports, a run given twice, and an interrupted or
incomplete report unless --allow-partial. The merged report.json's path is
printed last.`,
		Example: `  strandlab merge _output/reports/20261130-061347-seed-122413 _output/reports/20261130-061721-seed-122413`,
		Args:    cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := outputDir(output)
			if err != nil {
				return err
			}
			_, err = mergeReports(args, out, allowPartial, time.Now(), os.Stdout, os.Stderr)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&output, "output", "_output", "output directory (relative to the repository root)")
	f.BoolVar(&allowPartial, "allow-partial", false, "pool interrupted or incomplete reports too")
	return cmd
}

// outputDir resolves --output as run does: a relative path is relative to
// the repository root.
func outputDir(dir string) (string, error) {
	if filepath.IsAbs(dir) {
		return dir, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	root, err := upstream.RepoRoot(wd)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, dir), nil
}

// mergeReports merges the reports at paths, writes the merged report under
// output/reports/<run-id>/ (and reports/latest/) and prints its report.json
// path to stdout as the last line; the builds' table and the notes go to
// stderr. A refusal writes nothing.
func mergeReports(paths []string, output string, allowPartial bool, now time.Time, stdout, stderr io.Writer) (string, error) {
	inputs := make([]report.MergeInput, len(paths))
	for i, p := range paths {
		in, err := report.ReadMergeInput(p)
		if err != nil {
			return "", err
		}
		inputs[i] = in
	}
	rep, err := report.Merge(inputs, report.MergeOptions{AllowPartial: allowPartial, Now: now})
	if err != nil {
		return "", err
	}
	dir := filepath.Join(output, "reports", rep.RunID)
	if err := report.Write(rep, dir, filepath.Join(output, "reports", "latest")); err != nil {
		return "", fmt.Errorf("write the merged report: %w", err)
	}
	fmt.Fprintf(stderr, "%s: %d runs pooled (seeds %s)\n%s", rep.Scenario, len(rep.MergedFrom), seedList(rep.Seeds), report.Table(rep))
	for _, n := range rep.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	path := filepath.Join(dir, "report.json")
	fmt.Fprintln(stdout, path)
	return path, nil
}

func seedList(seeds []int64) string {
	s := make([]string, len(seeds))
	for i, x := range seeds {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, ", ")
}
