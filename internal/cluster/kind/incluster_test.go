package kind

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/apply"
	"github.com/strandlab/strandlab/internal/csidriver"
	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/manifests"
)

// TestCSIManifest: the in-cluster CSI objects decode, run the built images
// and serve the scenario's driver name, each container requesting CPU; the
// node plugin registers with the kubelet and bind-mounts, which is what
// makes it work with real kubelets.
func TestCSIManifest(t *testing.T) {
	images := map[string]string{"csi-driver": "strandlab/csi-driver:aaa", "csi-attacher": "strandlab/csi-attacher:bbb", "csi-provisioner": "strandlab/csi-provisioner:ccc"}
	objs, err := apply.Decode(csiManifest(images, "strandlab.example.com", nil))
	if err != nil {
		t.Fatal(err)
	}
	var deployment *appsv1.Deployment
	var daemonSet *appsv1.DaemonSet
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			deployment = o
		case *appsv1.DaemonSet:
			daemonSet = o
		}
	}
	if deployment == nil || daemonSet == nil {
		t.Fatalf("want a controller Deployment and a node DaemonSet, got %d objects", len(objs))
	}
	got := map[string]string{}
	for _, c := range deployment.Spec.Template.Spec.Containers {
		got[c.Name] = c.Image
	}
	// Not BestEffort: a busy node would starve them (cpu.shares 2).
	for _, c := range append(deployment.Spec.Template.Spec.Containers, daemonSet.Spec.Template.Spec.Containers...) {
		if c.Resources.Requests.Cpu().IsZero() {
			t.Errorf("container %s requests no CPU", c.Name)
		}
	}
	for _, c := range daemonSet.Spec.Template.Spec.Containers {
		got["node/"+c.Name] = c.Image
		args := strings.Join(c.Args, " ")
		for _, want := range []string{"--drivername=strandlab.example.com", "--registration-dir=/var/lib/kubelet/plugins_registry", "--publish-mode=bind",
			"--endpoint=unix:///var/lib/kubelet/plugins/strandlab.example.com/csi.sock"} {
			if !strings.Contains(args, want) {
				t.Errorf("node plugin args %q lack %s", args, want)
			}
		}
		if c.SecurityContext == nil || c.SecurityContext.Privileged == nil || !*c.SecurityContext.Privileged {
			t.Errorf("node plugin is not privileged: it cannot bind-mount into the kubelet's pod directories")
		}
	}
	want := map[string]string{"csi-driver": "strandlab/csi-driver:aaa", "csi-attacher": "strandlab/csi-attacher:bbb",
		"csi-provisioner": "strandlab/csi-provisioner:ccc", "node/csi-driver": "strandlab/csi-driver:aaa"}
	for name, image := range want {
		if got[name] != image {
			t.Errorf("container %s runs %q, want %q", name, got[name], image)
		}
	}
	if !deployment.Spec.Template.Spec.HostNetwork || !daemonSet.Spec.Template.Spec.HostNetwork {
		t.Errorf("the CSI pods must use the host network (no kube-proxy in the cluster)")
	}
}

// TestUpstreamCSIManifest: run --csi-driver upstream deploys upstream's
// hostpath driver (a StatefulSet strandlab's apply can create) under the
// scenario's driver name, with attach on, and only on one worker.
func TestUpstreamCSIManifest(t *testing.T) {
	objs, err := apply.Decode(upstreamCSIManifest("strandlab.example.com"))
	if err != nil {
		t.Fatal(err)
	}
	var sts *appsv1.StatefulSet
	for _, o := range objs {
		if s, ok := o.(*appsv1.StatefulSet); ok {
			sts = s
		}
	}
	if sts == nil || sts.Spec.Template.Labels["app"] != "csi-hostpath-upstream" {
		t.Fatalf("want the StatefulSet csi-hostpath-upstream (label app, which the start waits on), got %+v", sts)
	}
	args := ""
	for _, c := range sts.Spec.Template.Spec.Containers {
		args += strings.Join(c.Args, " ") + " "
	}
	if !strings.Contains(args, "--drivername=strandlab.example.com") || !strings.Contains(args, "--enable-attach") {
		t.Errorf("the upstream driver does not serve the scenario's name with attach: %s", args)
	}
	for _, tc := range []struct {
		spec    cluster.Spec
		wantErr string
	}{
		{cluster.Spec{Nodes: 1, CSIDeployment: cluster.CSIUpstream}, ""},
		{cluster.Spec{Nodes: 3, CSIDeployment: cluster.CSIUpstream}, "cluster.nodes: 3; --csi-driver upstream keeps every volume on the one node"},
		{cluster.Spec{Nodes: 1, RuntimeTimings: "timings.json"}, "--runtime-timings: the provider's kubelets are real"},
	} {
		err := cluster.CheckSpec(&Provider{}, tc.spec)
		if (tc.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckSpec(%d workers, upstream) = %v, want %q", tc.spec.Nodes, err, tc.wantErr)
		}
	}
}

// A scenario's CSI faults reach both csi-driver containers as the flags
// the local provider passes, JSON intact, and no other container.
func TestCSIManifestFaultArgs(t *testing.T) {
	rules := []fault.CSIError{{Call: "ControllerUnpublishVolume", Code: "DEADLINE_EXCEEDED", Nodes: []string{"o'brien"}, Fraction: 1}}
	args, err := csidriver.FaultArgs(rules, 9)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := apply.Decode(csiManifest(nil, manifests.CSIDriverName, args))
	if err != nil {
		t.Fatal(err)
	}
	var containers []corev1.Container
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			containers = append(containers, o.Spec.Template.Spec.Containers...)
		case *appsv1.DaemonSet:
			containers = append(containers, o.Spec.Template.Spec.Containers...)
		}
	}
	drivers := 0
	for _, c := range containers {
		has := slices.Equal(c.Args[len(c.Args)-2:], args)
		if c.Name == "csi-driver" {
			drivers++
			if !has {
				t.Errorf("csi-driver args %q do not end with %q", c.Args, args)
			}
		} else if slices.Contains(c.Args, args[1]) {
			t.Errorf("%s got the driver's fault flags: %q", c.Name, c.Args)
		}
	}
	if drivers != 2 {
		t.Errorf("%d csi-driver containers, want the controller's and the node plugin's", drivers)
	}
}
