// Package ownership marks what strandlab creates — a cluster's state
// directory and the processes it starts — so that `strandlab down` and the
// stale-state sweep act only on what they can prove is their own: a
// directory holding a marker strandlab wrote (a random run token, the
// creating process), and processes whose pid still names the process that
// was recorded (same start time, same executable), never a pid that the
// kernel has since given to something else.
package ownership

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/prometheus/procfs"

	"github.com/strandlab/strandlab/internal/safefile"
)

// MarkerFile is the marker's name inside a state directory.
const MarkerFile = "strandlab-state.json"

// maxMarkerSize bounds what ReadMarker reads: a marker is a few hundred bytes.
const maxMarkerSize = 64 << 10

// Marker says that strandlab created the directory holding it, for which
// run and provider, and whether the cluster was kept.
type Marker struct {
	// Token is random, 128 bits in hex: a directory copied or forged by
	// hand does not carry the token the cluster was created with.
	Token     string    `json:"token"`
	Provider  string    `json:"provider"`
	Creator   ProcessID `json:"creator"`
	CreatedAt time.Time `json:"created_at"`
	// Kept: the cluster outlives its run (--keep); only a kept cluster is
	// `strandlab down`'s to stop.
	Kept bool `json:"kept"`
	// KindCluster is the kind cluster's name (kind provider).
	KindCluster string `json:"kind_cluster,omitempty"`
}

// ProcessID names one process for as long as it lives: a pid alone may be
// reused by another process once the first has exited.
type ProcessID struct {
	PID int `json:"pid"`
	// StartTime is when the process started, in clock ticks since boot
	// (/proc/<pid>/stat's starttime).
	StartTime uint64 `json:"start_time"`
	// Executable is /proc/<pid>/exe when it was recorded.
	Executable string `json:"executable"`
}

var tokenPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// NewMarker is a marker for a directory the calling process creates now.
func NewMarker(provider string, kept bool) (Marker, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return Marker{}, err
	}
	self, err := Identify(os.Getpid())
	if err != nil {
		return Marker{}, err
	}
	return Marker{Token: hex.EncodeToString(b), Provider: provider, Creator: self, CreatedAt: time.Now().UTC(), Kept: kept}, nil
}

// Identify reads pid's start time and executable.
func Identify(pid int) (ProcessID, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return ProcessID{}, err
	}
	st, err := p.Stat()
	if err != nil {
		return ProcessID{}, err
	}
	exe, err := p.Executable()
	if err != nil {
		return ProcessID{}, fmt.Errorf("pid %d: executable: %w", pid, err)
	}
	return ProcessID{PID: pid, StartTime: st.Starttime, Executable: exe}, nil
}

// Alive reports whether id's pid still names the recorded process (not a
// zombie, same start time and executable). A process whose executable
// cannot be read (another user's) is not ours.
func (id ProcessID) Alive() bool {
	if id.PID <= 1 {
		return false
	}
	p, err := procfs.NewProc(id.PID)
	if err != nil {
		return false
	}
	st, err := p.Stat()
	if err != nil || st.State == "Z" || st.Starttime != id.StartTime {
		return false
	}
	exe, err := p.Executable()
	return err == nil && exe == id.Executable
}

// WriteMarker writes m into dir, atomically.
func WriteMarker(dir string, m Marker) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return safefile.WriteAtomic(filepath.Join(dir, MarkerFile), append(data, '\n'))
}

// ErrNotOurs is wrapped by ReadMarker's refusals: dir is not a state
// directory strandlab created.
var ErrNotOurs = errors.New("not a state directory strandlab created")

// ReadMarker reads and checks dir's marker. dir must be a directory, not a
// symbolic link, and its marker a regular file strandlab's format, with a
// token; provider, if not empty, must be the marker's. Anything else is an
// error wrapping ErrNotOurs.
func ReadMarker(dir, provider string) (Marker, error) {
	fi, err := os.Lstat(dir)
	switch {
	case err != nil:
		return Marker{}, fmt.Errorf("%s: %w (%w)", dir, ErrNotOurs, err)
	case fi.Mode()&os.ModeSymlink != 0:
		return Marker{}, fmt.Errorf("%s: %w: a symbolic link (down never follows one)", dir, ErrNotOurs)
	case !fi.IsDir():
		return Marker{}, fmt.Errorf("%s: %w: not a directory", dir, ErrNotOurs)
	}
	path := filepath.Join(dir, MarkerFile)
	fi, err = os.Lstat(path)
	switch {
	case err != nil:
		return Marker{}, fmt.Errorf("%s: %w: no %s (%w)", dir, ErrNotOurs, MarkerFile, err)
	case !fi.Mode().IsRegular():
		return Marker{}, fmt.Errorf("%s: %w: %s is not a regular file", dir, ErrNotOurs, MarkerFile)
	case fi.Size() > maxMarkerSize:
		return Marker{}, fmt.Errorf("%s: %w: %s is %d bytes", dir, ErrNotOurs, MarkerFile, fi.Size())
	}
	f, err := os.Open(path)
	if err != nil {
		return Marker{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxMarkerSize))
	if err != nil {
		return Marker{}, err
	}
	var m Marker
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return Marker{}, fmt.Errorf("%s: %w: %s: %w", dir, ErrNotOurs, MarkerFile, err)
	}
	switch {
	case !tokenPattern.MatchString(m.Token):
		return Marker{}, fmt.Errorf("%s: %w: %s has no run token", dir, ErrNotOurs, MarkerFile)
	case provider != "" && m.Provider != provider:
		return Marker{}, fmt.Errorf("%s: %w by the %s provider: its marker says %q", dir, ErrNotOurs, provider, m.Provider)
	case m.Creator.PID <= 1 || m.Creator.StartTime == 0 || m.Creator.Executable == "":
		return Marker{}, fmt.Errorf("%s: %w: %s names no creating process", dir, ErrNotOurs, MarkerFile)
	}
	return m, nil
}

// ReadKept is ReadMarker for `strandlab down`: the directory must also be a
// kept cluster's (--keep), and the run that made it must have ended (or be
// the caller itself, which may stop what it kept).
func ReadKept(dir, provider string) (Marker, error) {
	m, err := ReadMarker(dir, provider)
	switch {
	case err != nil:
		return Marker{}, err
	case !m.Kept:
		return Marker{}, fmt.Errorf("%s: its cluster was not kept (--keep): the run that made it removes it", dir)
	case m.Creator.Alive() && m.Creator.PID != os.Getpid():
		return Marker{}, fmt.Errorf("%s: the run that made it (pid %d) is still running: stop that run (Ctrl-C) instead", dir, m.Creator.PID)
	}
	return m, nil
}
