package render

import (
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/strandlab/strandlab/internal/report"
)

// Write writes report.json (report.Encode) and report.md into dir
// atomically (a reader never sees a half-written file) and, when latest is
// not empty, replaces latest with a copy of them as a whole
// (report.ReplaceDir: latest never mixes two runs' files). When the report
// has at least one build it also writes the comparison, compare.md and
// compare.png. If the plot cannot be drawn, the other files are still
// written, a compare.png left in dir by an earlier write is removed (it
// would show other figures) and the error is returned. It renders what r
// holds: the tests against the baseline are the ones report.SetTests set.
func Write(r *report.Report, dir, latest string) error {
	js, err := report.Encode(r)
	if err != nil {
		return err
	}
	files := map[string][]byte{"report.json": js, "report.md": []byte(Markdown(r))}
	var plotErr error
	if len(r.Builds) > 0 {
		files[CompareMarkdownFile] = []byte(CompareMarkdown(r))
		var png []byte
		if png, plotErr = drawPlot(r); plotErr == nil {
			files[ComparePlotFile] = png
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := report.WriteFileAtomic(filepath.Join(dir, name), files[name]); err != nil {
			return err
		}
	}
	if plotErr != nil {
		if err := os.Remove(filepath.Join(dir, ComparePlotFile)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	if latest != "" {
		if err := report.ReplaceDir(latest, files); err != nil {
			return err
		}
	}
	return plotErr
}
