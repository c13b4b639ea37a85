package kind

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/klog/v2"
	kindlog "sigs.k8s.io/kind/pkg/log"
)

// kindLogger sends kind's user-facing lines (V(0): "Preparing nodes", ...)
// to the progress writer, prefixed, and its debug levels to klog at
// strandlab's -v 2 and above (kind's V(3) holds kubeadm's whole output).
type kindLogger struct{ progress io.Writer }

func newKindLogger(progress io.Writer) kindlog.Logger {
	if progress == nil {
		progress = io.Discard
	}
	return kindLogger{progress}
}

// Warn: kind's warnings here are about choices strandlab made on purpose
// (its own network, cgroup v1 hosts, no storage manifest): -v 1 shows them.
func (l kindLogger) Warn(message string) { klog.V(1).InfoS("kind: "+message, "level", "warning") }
func (l kindLogger) Warnf(format string, args ...any) {
	l.Warn(fmt.Sprintf(format, args...))
}
func (l kindLogger) Error(message string) { klog.ErrorS(nil, "kind: "+message) }
func (l kindLogger) Errorf(format string, args ...any) {
	l.Error(fmt.Sprintf(format, args...))
}

func (l kindLogger) V(level kindlog.Level) kindlog.InfoLogger {
	if level == 0 {
		return progressLine{l.progress}
	}
	return klogLine{klog.V(klog.Level(level) + 1)}
}

type progressLine struct{ w io.Writer }

func (p progressLine) Info(message string) {
	if message = strings.TrimSpace(message); message != "" {
		fmt.Fprintf(p.w, ">> kind: %s\n", message)
	}
}
func (p progressLine) Infof(format string, args ...any) { p.Info(fmt.Sprintf(format, args...)) }
func (p progressLine) Enabled() bool                    { return true }

type klogLine struct{ v klog.Verbose }

func (k klogLine) Info(message string)              { k.v.InfoS("kind: " + message) }
func (k klogLine) Infof(format string, args ...any) { k.Info(fmt.Sprintf(format, args...)) }
func (k klogLine) Enabled() bool                    { return k.v.Enabled() }
