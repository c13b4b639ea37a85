package csidriver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// VolumeState is the persisted state of one volume, shared by the controller
// and node instances through <state-dir>/state/<volume-id>.json.
type VolumeState struct {
	ID            string            `json:"id"`
	Name          string            `json:"name"`
	CapacityBytes int64             `json:"capacityBytes"`
	Parameters    map[string]string `json:"parameters,omitempty"`
	// Published holds the nodes the volume is ControllerPublished (attached) to.
	Published map[string]Attachment `json:"published,omitempty"`
	// Nodes holds what each node has done with the volume (stage/publish).
	Nodes map[string]*NodeUsage `json:"nodes,omitempty"`
}

// Attachment records one ControllerPublishVolume, so that a repeated call can
// be checked for compatibility.
type Attachment struct {
	AccessMode string `json:"accessMode"`
	Readonly   bool   `json:"readonly,omitempty"`
}

// NodeUsage is one node's use of a volume.
type NodeUsage struct {
	StagingPath string `json:"stagingPath,omitempty"`
	// Targets maps a NodePublishVolume target path to whether it is read-only.
	Targets map[string]bool `json:"targets,omitempty"`
}

// PublishedNodes returns the nodes the volume is attached to, sorted.
func (v VolumeState) PublishedNodes() []string {
	nodes := make([]string, 0, len(v.Published))
	for n := range v.Published {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	return nodes
}

// nodeUsage returns a node's usage, nil if none; v may be nil.
func (v *VolumeState) nodeUsage(nodeID string) *NodeUsage {
	if v == nil {
		return nil
	}
	return v.Nodes[nodeID]
}

// usage returns a node's usage, creating it.
func (v *VolumeState) usage(nodeID string) *NodeUsage {
	if v.Nodes == nil {
		v.Nodes = map[string]*NodeUsage{}
	}
	u := v.Nodes[nodeID]
	if u == nil {
		u = &NodeUsage{}
		v.Nodes[nodeID] = u
	}
	return u
}

// pruneUsage drops a node's entry once it neither stages nor publishes the
// volume, so the state file shows only live usage.
func (v *VolumeState) pruneUsage(nodeID string) {
	if u := v.Nodes[nodeID]; u != nil && u.StagingPath == "" && len(u.Targets) == 0 {
		delete(v.Nodes, nodeID)
	}
	if len(v.Nodes) == 0 {
		v.Nodes = nil
	}
}

// idPattern restricts volume and node IDs to names that are safe as single
// path elements: they come from clients and end up in file names.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

func validID(id string) bool { return idPattern.MatchString(id) }

// volumeIDForName derives the volume ID from the CreateVolume name. Making it
// deterministic turns CreateVolume idempotency into a plain lookup, and
// concurrent creates of one name serialise on the same lock.
func volumeIDForName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "vol-" + hex.EncodeToString(sum[:16])
}

// store is the on-disk state shared between driver instances.
type store struct {
	dir string

	mu    sync.Mutex
	locks map[string]*volumeLock
}

type volumeLock struct {
	mu   sync.Mutex
	refs int
}

func newStore(dir string) (*store, error) {
	s := &store{dir: dir, locks: map[string]*volumeLock{}}
	for _, d := range []string{s.stateDir(), s.volumesDir(), s.locksDir(), s.nodesDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	return s, nil
}

func (s *store) stateDir() string   { return filepath.Join(s.dir, "state") }
func (s *store) volumesDir() string { return filepath.Join(s.dir, "volumes") }
func (s *store) locksDir() string   { return filepath.Join(s.dir, "locks") }
func (s *store) nodesDir() string   { return filepath.Join(s.dir, "nodes") }

func (s *store) statePath(id string) string { return filepath.Join(s.stateDir(), id+".json") }
func (s *store) dataDir(id string) string   { return filepath.Join(s.volumesDir(), id) }

// lock serialises all operations on one volume: a mutex for goroutines of
// this process, then flock(2) for other processes. The lock file is separate
// from the state file because the state file is replaced by rename, which
// would leave a lock holder locking a stale inode. For the same reason lock
// files are never removed.
func (s *store) lock(id string) (unlock func(), err error) {
	s.mu.Lock()
	l := s.locks[id]
	if l == nil {
		l = &volumeLock{}
		s.locks[id] = l
	}
	l.refs++
	s.mu.Unlock()
	l.mu.Lock()

	release := func() {
		l.mu.Unlock()
		s.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(s.locks, id)
		}
		s.mu.Unlock()
	}

	f, err := os.OpenFile(filepath.Join(s.locksDir(), id+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		release()
		return nil, fmt.Errorf("lock volume %s: %w", id, err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		release()
		return nil, fmt.Errorf("flock %s: %w", f.Name(), err)
	}
	return func() {
		// Closing the descriptor drops the flock.
		f.Close()
		release()
	}, nil
}

// lockVolume takes the volume's lock and loads its state (nil if the volume
// does not exist), with failures as gRPC Internal errors. On success the
// caller must call unlock.
func (s *store) lockVolume(id string) (v *VolumeState, unlock func(), err error) {
	unlock, err = s.lock(id)
	if err != nil {
		return nil, nil, status.Error(codes.Internal, err.Error())
	}
	if v, err = s.load(id); err != nil {
		unlock()
		return nil, nil, status.Error(codes.Internal, err.Error())
	}
	return v, unlock, nil
}

// load returns the volume's state, or nil if the volume does not exist.
func (s *store) load(id string) (*VolumeState, error) {
	return readState(s.statePath(id))
}

func readState(path string) (*VolumeState, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read volume state: %w", err)
	}
	v := &VolumeState{}
	if err := json.Unmarshal(b, v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// save writes the volume's state atomically, so that readers in other
// processes (which do not take the lock) never see a partial file.
func (s *store) save(v *VolumeState) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode the state of volume %s: %w", v.ID, err)
	}
	return writeFileAtomic(s.statePath(v.ID), append(b, '\n'))
}

// remove deletes the volume's data and state. Data goes first: if we die in
// between, the state still exists and a retried DeleteVolume finishes the job.
func (s *store) remove(id string) error {
	if err := os.RemoveAll(s.dataDir(id)); err != nil {
		return fmt.Errorf("remove the data of volume %s: %w", id, err)
	}
	if err := os.Remove(s.statePath(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove the state of volume %s: %w", id, err)
	}
	return nil
}

// registerNode marks a node as known, which ControllerPublishVolume requires.
func (s *store) registerNode(nodeID string) error {
	return writeFileAtomic(filepath.Join(s.nodesDir(), nodeID), []byte(nodeID+"\n"))
}

func (s *store) nodeKnown(nodeID string) (bool, error) {
	if !validID(nodeID) {
		return false, nil
	}
	_, err := os.Stat(filepath.Join(s.nodesDir(), nodeID))
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check node %s: %w", nodeID, err)
	}
	return true, nil
}

// writeFileAtomic writes via a temporary file in the same directory and a
// rename, so the file is either the old or the new content.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// LoadVolumeStates reads the state of all volumes under stateDir, sorted by
// volume ID. It takes no locks; every file it reads is complete because
// writers replace files atomically.
func LoadVolumeStates(stateDir string) ([]VolumeState, error) {
	dir := filepath.Join(stateDir, "state")
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list volume states: %w", err)
	}
	var out []VolumeState
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue
		}
		v, err := readState(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		if v != nil { // deleted since ReadDir
			out = append(out, *v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
