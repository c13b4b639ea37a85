package workload

import "testing"

func TestStatefulSetFromManifest(t *testing.T) {
	tests := []StatefulSet{
		{Namespace: "strandlab", Name: "web", Replicas: 3},
		{Namespace: "other", Name: "db", Replicas: 7},
		{Namespace: "strandlab", Name: "soak", Replicas: 12, HostNetwork: true},
	}
	for _, want := range tests {
		t.Run(want.Name, func(t *testing.T) {
			sts, err := statefulSetFromManifest(want)
			if err != nil {
				t.Fatal(err)
			}
			if sts.Name != want.Name || sts.Namespace != want.Namespace || *sts.Spec.Replicas != want.Replicas || sts.Spec.ServiceName != want.Name {
				t.Errorf("got %s/%s replicas %d service %s", sts.Namespace, sts.Name, *sts.Spec.Replicas, sts.Spec.ServiceName)
			}
			if sts.Spec.Selector.MatchLabels[LabelStatefulSet] != want.Name || sts.Spec.Template.Labels[LabelStatefulSet] != want.Name {
				t.Errorf("selector %v / template labels %v do not select %s", sts.Spec.Selector.MatchLabels, sts.Spec.Template.Labels, want.Name)
			}
			if sts.Spec.Template.Spec.HostNetwork != want.HostNetwork {
				t.Errorf("hostNetwork = %v, want %v", sts.Spec.Template.Spec.HostNetwork, want.HostNetwork)
			}
			if len(sts.Spec.Template.Spec.Containers) == 0 {
				t.Error("no containers from the manifest")
			}
		})
	}
}
