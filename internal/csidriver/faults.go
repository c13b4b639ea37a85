package csidriver

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/fault"
)

// PVCNameParameter is the CreateVolume parameter in which csi-provisioner
// names the volume's claim when it runs with --extra-create-metadata; a
// CSIError's pvcs match it.
const PVCNameParameter = "csi.storage.k8s.io/pvc/name"

// faultStream keeps the driver's draws apart from the other components'
// that share the scenario's seed.
const faultStream = 0x637369

// InjectedMessage starts the message of every error the driver injects, so
// that a VolumeAttachment's attachError or detachError shows where it came
// from.
const InjectedMessage = "injected by strandlab's CSI driver"

// injector applies a scenario's csiErrors to the driver's calls (a gRPC
// unary interceptor), and journals each call it failed or slowed.
type injector struct {
	rules   []fault.CSIError
	codes   []codes.Code
	sampler *fault.Sampler
	store   *store
	node    string // the instance's node, for Node* calls
	journal string // JSON-lines file; "" for none

	mu       sync.Mutex
	matched  []int // per rule: matching calls so far
	affected []int // per rule: calls failed or slowed so far
}

// newInjector validates rules and parses their codes; nil without rules.
// Each instance draws from its own stream (its node), so that one node's
// calls do not move another's draws.
func newInjector(rules []fault.CSIError, seed uint64, st *store, node, journal string) (*injector, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if err := fault.ValidateCSIErrors(rules); err != nil {
		return nil, err
	}
	in := &injector{rules: rules, codes: make([]codes.Code, len(rules)), store: st, node: node, journal: journal,
		matched: make([]int, len(rules)), affected: make([]int, len(rules))}
	for i, r := range rules {
		if r.Code == "" {
			continue
		}
		// codes.Code parses the canonical names, quoted, as JSON does.
		if err := in.codes[i].UnmarshalJSON([]byte(`"` + r.Code + `"`)); err != nil {
			return nil, fmt.Errorf("csiErrors[%d].code: %w", i, err)
		}
	}
	h := fnv.New64a()
	h.Write([]byte(node))
	in.sampler = fault.NewSampler(seed, faultStream^h.Sum64())
	return in, nil
}

// csiCall is what a rule selects a call by.
type csiCall struct {
	method, node, volume string
}

// callOf names a request's CSI method, node and volume; ok is false for a
// method no rule can name.
func (in *injector) callOf(fullMethod string, req any) (csiCall, bool) {
	c := csiCall{method: path.Base(fullMethod)}
	switch r := req.(type) {
	case *csi.ControllerPublishVolumeRequest:
		c.node, c.volume = r.GetNodeId(), r.GetVolumeId()
	case *csi.ControllerUnpublishVolumeRequest:
		c.node, c.volume = r.GetNodeId(), r.GetVolumeId()
	case *csi.NodeStageVolumeRequest:
		c.node, c.volume = in.node, r.GetVolumeId()
	case *csi.NodeUnstageVolumeRequest:
		c.node, c.volume = in.node, r.GetVolumeId()
	case *csi.NodePublishVolumeRequest:
		c.node, c.volume = in.node, r.GetVolumeId()
	case *csi.NodeUnpublishVolumeRequest:
		c.node, c.volume = in.node, r.GetVolumeId()
	default:
		return c, false
	}
	return c, true
}

// pvcOf is the claim of a volume, as the provisioner named it; "" when the
// volume is unknown or was created without the claim's name.
func (in *injector) pvcOf(volume string) string {
	if !validID(volume) {
		return ""
	}
	v, err := in.store.load(volume)
	if err != nil || v == nil {
		return ""
	}
	return v.Parameters[PVCNameParameter]
}

// decide returns the index of the rule that fails or slows this call, -1
// for none: the first rule that selects the call and has calls left to
// affect decides, by its n-th call or its fraction's draw.
func (in *injector) decide(c csiCall) int {
	pvc, pvcKnown := "", false
	for i, r := range in.rules {
		if len(r.PVCs) > 0 && !pvcKnown {
			pvc, pvcKnown = in.pvcOf(c.volume), true
		}
		if !r.Matches(c.method, c.node, pvc) {
			continue
		}
		in.mu.Lock()
		if r.Count > 0 && in.affected[i] >= r.Count {
			in.mu.Unlock()
			continue
		}
		in.matched[i]++
		hit := false
		if r.Nth > 0 {
			hit = in.matched[i] == r.Nth
		} else {
			hit = in.sampler.Chance(r.Fraction)
		}
		if hit {
			in.affected[i]++
		}
		in.mu.Unlock()
		if hit {
			return i
		}
		return -1
	}
	return -1
}

// intercept is the gRPC unary interceptor: a call a rule selects waits for
// the rule's latency, then fails with its code or, without one, goes on to
// the driver with a context that no longer ends with the caller's (the
// slow back end finishes what it started, even when the sidecar or kubelet
// gave up waiting).
func (in *injector) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	c, ok := in.callOf(info.FullMethod, req)
	if !ok {
		return handler(ctx, req)
	}
	i := in.decide(c)
	if i < 0 {
		return handler(ctx, req)
	}
	r := in.rules[i]
	latency := in.sampler.Draw(r.Latency)
	in.record(i, c, latency)
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-t.C:
		case <-ctx.Done():
			// The caller gave up; what it would have got no longer matters,
			// but a call without an error still does its work, late.
			if r.Code != "" {
				t.Stop()
				return nil, status.FromContextError(ctx.Err()).Err()
			}
			<-t.C
		}
	}
	if r.Code != "" {
		return nil, status.Errorf(in.codes[i], "%s (csiErrors[%d])", InjectedMessage, i)
	}
	return handler(context.WithoutCancel(ctx), req)
}

// record logs and journals one affected call.
func (in *injector) record(i int, c csiCall, latency time.Duration) {
	r := in.rules[i]
	klog.V(2).InfoS("Injected CSI fault", "rule", i, "method", c.method, "node", c.node, "volume", c.volume, "code", r.Code, "latency", latency)
	if in.journal == "" {
		return
	}
	e := fault.JournalEntry{Time: time.Now(), Kind: fault.JournalCSIError, Resource: "csi", Verb: c.method, Node: c.node,
		Body: fmt.Sprintf("csiErrors[%d] volume=%s code=%s latency=%s", i, c.volume, r.Code, latency)}
	if validID(c.volume) {
		// The PV's name, which the harness's timelines know the volume by.
		if v, err := in.store.load(c.volume); err == nil && v != nil {
			e.Name = v.Name
		}
	}
	if r.Code != "" {
		e.Code = int(in.codes[i])
	}
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	// One line per write on an O_APPEND file: readers never see half an
	// entry, and instances sharing a state directory keep their own files.
	f, err := os.OpenFile(in.journal, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		klog.ErrorS(err, "Journaling an injected CSI fault", "journal", in.journal)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		klog.ErrorS(err, "Journaling an injected CSI fault", "journal", in.journal)
	}
}

// FaultJournalDir is where, under a state directory, each driver instance
// journals the calls it failed or slowed: <instance>.jsonl.
const FaultJournalDir = "faults"

// faultJournalPath is the journal of the instance serving mode for node.
func faultJournalPath(stateDir string, mode Mode, node string) string {
	name := node
	if mode == ModeController {
		name = "controller"
	}
	return filepath.Join(stateDir, FaultJournalDir, name+".jsonl")
}

// ReadFaultJournal reads every instance's journal of injected faults under
// a state directory, in no particular order; no journal is no entries.
func ReadFaultJournal(stateDir string) ([]fault.JournalEntry, error) {
	files, err := filepath.Glob(filepath.Join(stateDir, FaultJournalDir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []fault.JournalEntry
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		entries, err := ParseFaultJournal(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, entries...)
	}
	return out, nil
}

// ParseFaultJournal parses one journal's JSON lines.
func ParseFaultJournal(b []byte) ([]fault.JournalEntry, error) {
	var out []fault.JournalEntry
	for n, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var e fault.JournalEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// FaultArgs are the csi-driver flags that hand an instance a scenario's
// CSI faults (tools/csi-driver parses them); none without rules.
func FaultArgs(rules []fault.CSIError, seed uint64) ([]string, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(rules)
	if err != nil {
		return nil, err
	}
	return []string{"--csi-errors=" + string(b), "--fault-seed=" + strconv.FormatUint(seed, 10)}, nil
}
