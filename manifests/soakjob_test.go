package manifests

import (
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

func decodeJob(t *testing.T, doc []byte) *batchv1.Job {
	t.Helper()
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	job, ok := obj.(*batchv1.Job)
	if !ok {
		t.Fatalf("%T, want a Job", obj)
	}
	return job
}

// The soak Job's contract (docs/soak-job.md): shard i runs with seed i and
// a run id of its own, as a non-root user, writing where the merge reads;
// the merge takes the directory, not a glob (no shell in the image).
func TestSoakJob(t *testing.T) {
	shards, merge := decodeJob(t, SoakJobShards), decodeJob(t, SoakJobMerge)
	if shards.Spec.CompletionMode == nil || *shards.Spec.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("shards: completionMode %v, want Indexed", shards.Spec.CompletionMode)
	}
	if p := shards.Spec.BackoffLimitPerIndex; p == nil || *p != 0 {
		t.Errorf("shards: backoffLimitPerIndex %v, want 0 (a retry would leave a partial report beside its own)", p)
	}
	args := strings.Join(shards.Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"run ", "--seed=$(JOB_COMPLETION_INDEX)", "--run-id-suffix=shard-$(JOB_COMPLETION_INDEX)", "--output=/reports/shards"} {
		if !strings.Contains(args, want) {
			t.Errorf("shards: args %q lack %q", args, want)
		}
	}
	mergeArgs := merge.Spec.Template.Spec.Containers[0].Args
	if mergeArgs[0] != "merge" || mergeArgs[len(mergeArgs)-1] != "/reports/shards/reports" {
		t.Errorf("merge: args %q, want merge ... /reports/shards/reports (where the shards' runs write)", mergeArgs)
	}
	pvc := ""
	for _, job := range []*batchv1.Job{shards, merge} {
		spec := job.Spec.Template.Spec
		c := spec.Containers[0]
		if c.Image != SoakJobImage {
			t.Errorf("%s: image %q, want %q (the tag the harness and users replace)", job.Name, c.Image, SoakJobImage)
		}
		if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("%s: not runAsNonRoot", job.Name)
		}
		if sc := c.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.Privileged != nil {
			t.Errorf("%s: container security context %+v", job.Name, sc)
		}
		if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
			t.Errorf("%s: mounts a service account token; it needs no API access", job.Name)
		}
		mounts := map[string]string{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		volumes := map[string]corev1.VolumeSource{}
		for _, v := range spec.Volumes {
			volumes[v.Name] = v.VolumeSource
		}
		if volumes[mounts["/tmp"]].EmptyDir == nil {
			t.Errorf("%s: /tmp is not an emptyDir (the root filesystem is read-only)", job.Name)
		}
		claim := volumes[mounts["/reports"]].PersistentVolumeClaim
		if claim == nil {
			t.Fatalf("%s: /reports is not a PVC", job.Name)
		}
		if pvc != "" && claim.ClaimName != pvc {
			t.Errorf("%s: reports claim %q, the shards' is %q", job.Name, claim.ClaimName, pvc)
		}
		pvc = claim.ClaimName
		if job.Namespace != "strandlab-soak" {
			t.Errorf("%s: namespace %q", job.Name, job.Namespace)
		}
	}
	if !strings.Contains(string(SoakJobReportsPVC), "name: "+pvc+"\n") {
		t.Errorf("reports-pvc.yaml does not define the claim %q", pvc)
	}
}
