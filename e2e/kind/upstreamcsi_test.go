package kind

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster/apply"
	"github.com/strandlab/strandlab/manifests"
)

// TestUpstreamCSIDeployable: manifests/kind/csi-hostpath-upstream.yaml
// (run --csi-driver upstream, for users with a registry) is accepted by a
// real API server of the pinned version: every object passes a
// server-side dry run (admission, validation, defaulting) and nothing is
// created. Its images cannot be pulled here, so this is as far as it runs.
func TestUpstreamCSIDeployable(t *testing.T) {
	f := features.New("upstream CSI driver manifest").
		Assess("every object passes a server-side dry run, and none is created", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			client := suite.Clientset(t, cfg)
			if err := apply.DryRun(ctx, client, manifests.KindCSIUpstream); err != nil {
				t.Fatalf("the API server refuses the upstream variant:\n%v", err)
			}
			if _, err := client.AppsV1().StatefulSets("kube-system").Get(ctx, "csi-hostpath-upstream", metav1.GetOptions{}); err == nil {
				t.Error("the dry run created the StatefulSet kube-system/csi-hostpath-upstream")
			}
			return ctx
		}).
		Assess("a broken object is refused with its name", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			broken := []byte(strings.Replace(string(manifests.KindCSIUpstream), "serviceAccountName: csi-hostpath-upstream", "serviceAccountName: Not_A_Name", 1))
			err := apply.DryRun(ctx, suite.Clientset(t, cfg), broken)
			if err == nil || !strings.Contains(err.Error(), "dry run of *v1.StatefulSet csi-hostpath-upstream") {
				t.Errorf("a StatefulSet with an invalid service account name: %v, want its refusal", err)
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}
