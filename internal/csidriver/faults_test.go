package csidriver

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/strandlab/strandlab/internal/fault"
)

// faultyDriver serves a driver in both mode for node-a, with rules, on a
// unix socket, as the sidecars and kubelets reach it; node-b is registered
// by a second instance. It returns clients of the served driver and its
// state directory.
func faultyDriver(t *testing.T, rules []fault.CSIError, seed uint64) (csi.ControllerClient, csi.NodeClient, string) {
	t.Helper()
	state := t.TempDir()
	d, err := NewDriver(Config{Mode: ModeBoth, NodeID: "node-a", StateDir: state, CSIErrors: rules, FaultSeed: seed})
	if err != nil {
		t.Fatal(err)
	}
	newTestDriver(t, state, ModeNode, "node-b")
	sock := filepath.Join(t.TempDir(), "csi.sock")
	lis, err := Listen(sock)
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Serve(sctx, lis) }()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return csi.NewControllerClient(conn), csi.NewNodeClient(conn), state
}

// createClaimVolume creates a volume as csi-provisioner with
// --extra-create-metadata does for claim pvc ("" for none).
func createClaimVolume(t *testing.T, c csi.ControllerClient, name, pvc string) string {
	t.Helper()
	var params map[string]string
	if pvc != "" {
		params = map[string]string{PVCNameParameter: pvc, "csi.storage.k8s.io/pvc/namespace": "strandlab"}
	}
	rsp, err := c.CreateVolume(ctx, createReq(name, 1<<20, params))
	if err != nil {
		t.Fatal(err)
	}
	return rsp.GetVolume().GetVolumeId()
}

// attachCycle publishes vol to node and unpublishes it again, as one
// attach and detach; it returns the two calls' codes.
func attachCycle(c csi.ControllerClient, vol, node string) (attach, detach codes.Code) {
	_, err := c.ControllerPublishVolume(ctx, pubReq(vol, node, csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false))
	attach = status.Code(err)
	_, err = c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: node})
	return attach, status.Code(err)
}

func TestCSIErrorsSelectCalls(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules []fault.CSIError
		// node and claim of the volume cycled; want is each of four
		// cycles' attach and detach codes.
		node, pvc string
		want      [4][2]codes.Code
	}{{
		name:  "the n-th attach fails, the others go through",
		rules: []fault.CSIError{{Call: "ControllerPublishVolume", Code: "UNAVAILABLE", Nth: 2}},
		node:  "node-a",
		want:  [4][2]codes.Code{{codes.OK, codes.OK}, {codes.Unavailable, codes.OK}, {codes.OK, codes.OK}, {codes.OK, codes.OK}},
	}, {
		name:  "every detach fails until the count is spent",
		rules: []fault.CSIError{{Call: "ControllerUnpublishVolume", Code: "DEADLINE_EXCEEDED", Fraction: 1, Count: 2}},
		node:  "node-b",
		// The first attach stays (the detach failed), so the next attaches
		// find the volume published to the node already: OK.
		want: [4][2]codes.Code{{codes.OK, codes.DeadlineExceeded}, {codes.OK, codes.DeadlineExceeded}, {codes.OK, codes.OK}, {codes.OK, codes.OK}},
	}, {
		name:  "a rule for another node changes nothing",
		rules: []fault.CSIError{{Call: "ControllerPublishVolume", Code: "INTERNAL", Fraction: 1, Nodes: []string{"node-b"}}},
		node:  "node-a",
		want:  [4][2]codes.Code{{codes.OK, codes.OK}, {codes.OK, codes.OK}, {codes.OK, codes.OK}, {codes.OK, codes.OK}},
	}, {
		name:  "a rule for the volume's claim applies",
		rules: []fault.CSIError{{Call: "ControllerPublishVolume", Code: "RESOURCE_EXHAUSTED", Fraction: 1, PVCs: []string{"data-0-web-0"}}},
		node:  "node-a", pvc: "data-0-web-0",
		want: [4][2]codes.Code{{codes.ResourceExhausted, codes.OK}, {codes.ResourceExhausted, codes.OK}, {codes.ResourceExhausted, codes.OK}, {codes.ResourceExhausted, codes.OK}},
	}, {
		name:  "a rule for another claim changes nothing",
		rules: []fault.CSIError{{Call: "ControllerPublishVolume", Code: "RESOURCE_EXHAUSTED", Fraction: 1, PVCs: []string{"data-0-web-1"}}},
		node:  "node-a", pvc: "data-0-web-0",
		want: [4][2]codes.Code{{codes.OK, codes.OK}, {codes.OK, codes.OK}, {codes.OK, codes.OK}, {codes.OK, codes.OK}},
	}, {
		name: "the first rule that selects a call decides",
		rules: []fault.CSIError{
			{Call: "ControllerPublishVolume", Code: "ABORTED", Nth: 1},
			{Call: "ControllerPublishVolume", Code: "INTERNAL", Fraction: 1},
		},
		node: "node-a",
		// The first rule selects every attach and fails only its first.
		want: [4][2]codes.Code{{codes.Aborted, codes.OK}, {codes.OK, codes.OK}, {codes.OK, codes.OK}, {codes.OK, codes.OK}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, state := faultyDriver(t, tc.rules, 1)
			vol := createClaimVolume(t, c, "pvc-1", tc.pvc)
			injected := 0
			for i, want := range tc.want {
				attach, detach := attachCycle(c, vol, tc.node)
				if got := [2]codes.Code{attach, detach}; got != want {
					t.Errorf("cycle %d: attach, detach = %v, want %v", i, got, want)
				}
				for _, code := range want {
					if code != codes.OK {
						injected++
					}
				}
			}
			entries, err := ReadFaultJournal(state)
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != injected {
				t.Fatalf("journal has %d entries, want one per injected error (%d): %+v", len(entries), injected, entries)
			}
			for _, e := range entries {
				if e.Kind != fault.JournalCSIError || e.Name != "pvc-1" || e.Node != tc.node || e.Code == 0 || !strings.Contains(e.Body, "volume="+vol) {
					t.Errorf("journal entry %+v: want a csi_error of pvc-1 (%s) on %s with its code", e, vol, tc.node)
				}
			}
		})
	}
}

// An injected error leaves the volume as it was: a failed detach keeps the
// attachment, as a storage back end that did not detach would, and the
// error names where it came from.
func TestCSIErrorKeepsState(t *testing.T) {
	c, _, state := faultyDriver(t, []fault.CSIError{{Call: "ControllerUnpublishVolume", Code: "INTERNAL", Nth: 1}}, 1)
	vol := createClaimVolume(t, c, "pvc-1", "")
	if _, err := c.ControllerPublishVolume(ctx, pubReq(vol, "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false)); err != nil {
		t.Fatal(err)
	}
	_, err := c.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: "node-a"})
	if status.Code(err) != codes.Internal || !strings.Contains(err.Error(), InjectedMessage) {
		t.Fatalf("detach: %v, want Internal %q", err, InjectedMessage)
	}
	st, err := newStore(state)
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.load(vol)
	if err != nil || v == nil {
		t.Fatalf("volume state: %v %v", v, err)
	}
	if got := v.PublishedNodes(); len(got) != 1 || got[0] != "node-a" {
		t.Errorf("published to %v after the failed detach, want [node-a]", got)
	}
}

// A latency without a code delays the call's own answer; a caller that
// stops waiting sees its deadline, and the work is done all the same.
func TestCSILatencyFinishesTheWork(t *testing.T) {
	c, _, state := faultyDriver(t, []fault.CSIError{{Call: "ControllerPublishVolume", Latency: fault.Delay{Fixed: fault.D(300 * time.Millisecond)}, Fraction: 1}}, 1)
	vol := createClaimVolume(t, c, "pvc-1", "")
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err := c.ControllerPublishVolume(cctx, pubReq(vol, "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("attach with a 50ms deadline: %v, want DeadlineExceeded", err)
	}
	st, err := newStore(state)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, err := st.load(vol)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.Published) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slowed attach never published the volume")
		}
		time.Sleep(20 * time.Millisecond)
	}
	entries, err := ReadFaultJournal(state)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Code != 0 || !strings.Contains(entries[0].Body, "latency=300ms") {
		t.Errorf("journal %+v: want one slowed call with its latency", entries)
	}
}

// Node calls carry the instance's node: a rule for node-a fails its
// staging, and the fraction's draws repeat with the seed.
func TestCSIErrorsNodeCallsAndSeed(t *testing.T) {
	run := func(seed uint64) []codes.Code {
		c, n, _ := faultyDriver(t, []fault.CSIError{{Call: "NodeStageVolume", Code: "UNAVAILABLE", Fraction: 0.5, Nodes: []string{"node-a"}}}, seed)
		vol := createClaimVolume(t, c, "pvc-1", "")
		if _, err := c.ControllerPublishVolume(ctx, pubReq(vol, "node-a", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, false)); err != nil {
			t.Fatal(err)
		}
		staging := filepath.Join(t.TempDir(), "staging")
		var got []codes.Code
		for range 40 {
			_, err := n.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: snw})
			got = append(got, status.Code(err))
		}
		return got
	}
	a, b, other := run(7), run(7), run(8)
	failed := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 7 drew %v, then %v", a, b)
		}
		if a[i] == codes.Unavailable {
			failed++
		} else if a[i] != codes.OK {
			t.Fatalf("stage %d: %v", i, a[i])
		}
	}
	if failed < 8 || failed > 32 {
		t.Errorf("fraction 0.5 failed %d of 40 stagings", failed)
	}
	if slices.Equal(a, other) {
		t.Errorf("seeds 7 and 8 drew the same %v", a)
	}
}

// Every code a scenario may name is one gRPC knows, listed in the codes'
// order from 1 (the report names a journaled code by its place).
func TestCSICodesParse(t *testing.T) {
	for i, name := range fault.CSICodes {
		in, err := newInjector([]fault.CSIError{{Call: "NodeStageVolume", Code: name, Nth: 1}}, 0, nil, "n", "")
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if in.codes[0] != codes.Code(i+1) {
			t.Errorf("%s parsed as %v, want code %d", name, in.codes[0], i+1)
		}
	}
}

// FaultArgs are flags tools/csi-driver accepts: what it hands the driver
// is what the scenario said.
func TestFaultArgsRoundTrip(t *testing.T) {
	rules := []fault.CSIError{{Call: "ControllerUnpublishVolume", Code: "DEADLINE_EXCEEDED", Latency: fault.Delay{Fixed: fault.D(time.Second)}, Nodes: []string{"node-1"}, PVCs: []string{"data-0-web-0"}, Nth: 3, Count: 1}}
	args, err := FaultArgs(rules, 42)
	if err != nil {
		t.Fatal(err)
	}
	if len(args) != 2 || !strings.HasPrefix(args[0], "--csi-errors=[") || args[1] != "--fault-seed=42" {
		t.Fatalf("FaultArgs = %q", args)
	}
	if none, _ := FaultArgs(nil, 42); none != nil {
		t.Errorf("FaultArgs(nil) = %q, want none", none)
	}
}
