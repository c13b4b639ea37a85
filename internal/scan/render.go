package scan

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// WriteJSON writes the report as indented JSON (the shape of Report).
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable writes one line per finding, or one line saying there are none
// (with what was scanned, so that an empty result is not mistaken for an
// empty cluster).
func WriteTable(w io.Writer, r *Report) error {
	if len(r.Findings) == 0 {
		_, err := fmt.Fprintf(w, "No stranded volumes, safety violations or phantom listings (%s: %d pods, %d nodes, %d VolumeAttachments; threshold %v).\n",
			r.Cluster, r.Counts.Pods, r.Counts.Nodes, r.Counts.VolumeAttachments, r.threshold())
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tNODE\tPOD\tVOLUME\tVOLUMEATTACHMENT\tSINCE\tEVIDENCE")
	for _, f := range r.Findings {
		age := r.CompletedAt.Sub(f.Since).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s (%v)\t%s (since: %s)\n",
			f.Kind, f.Node, orDash(f.Pod), f.Volume, orDash(f.VolumeAttachment), f.Since.UTC().Format(time.RFC3339), age, f.Evidence, f.SinceEvidence)
	}
	return tw.Flush()
}

// orDash: "-" for an empty column (a phantom listing has no pod).
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func (r *Report) threshold() time.Duration {
	return time.Duration(r.ThresholdSeconds * float64(time.Second))
}
