package kind

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/strandlab/strandlab/e2e/suite"
	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/cluster/apply"
	"github.com/strandlab/strandlab/internal/report"
	"github.com/strandlab/strandlab/manifests"
)

// The soak Job on the kind cluster: a few cycles per shard, for stock and
// fix (STRANDLAB_SOAKJOB_CYCLES and STRANDLAB_SOAKJOB_BUILDS change them).
const (
	soakJobShards = 2
	// soakJobReports is where the reports volume is on the nodes: the
	// manifests' PVC is bound to a hostPath PV in the directory every node of
	// strandlab's kind cluster mounts from the host (the CSI driver's shared
	// state, <state dir>/csi; internal/cluster/kind), so the shards may run
	// on any worker, the volume is shared like a ReadWriteMany one, and the
	// test reads the reports on the host. A hostPath PV, not a hostPath in
	// the pods: the namespace enforces the restricted Pod Security Standard,
	// which refuses hostPath volumes in pods.
	soakJobReports = "/strandlab-csi/soak-job-reports"
	soakJobPV      = "strandlab-soak-reports-e2e"
)

// TestSoakJob builds the strandlab image, loads it into the nodes, runs
// manifests/soak-job's shards as an Indexed Job (each shard a local-provider
// run inside its pod, seed = completion index, in a namespace that enforces
// the restricted Pod Security Standard), then its merge Job, and checks that
// every shard completed and that the merged report's counts are the sum of
// the shards'.
func TestSoakJob(t *testing.T) {
	var (
		ns, host string
		tag      string
	)
	cycles, builds := 100, "stock,fix"
	if v := os.Getenv("STRANDLAB_SOAKJOB_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("STRANDLAB_SOAKJOB_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	if v := os.Getenv("STRANDLAB_SOAKJOB_BUILDS"); v != "" {
		builds = v
	}
	f := features.New("the soak as an Indexed Job of the strandlab image").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			root := suite.RepoRoot(t)
			begin := time.Now()
			cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "tools/images/build-strandlab.sh"), filepath.Join(root, "_output"), "fix")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("tools/images/build-strandlab.sh: %v\n%s", err, lastLines(stderr.String(), 20))
			}
			_, tag, _ = strings.Cut(strings.TrimSpace(lastLines(string(out), 1)), "strandlab=")
			if !strings.HasPrefix(tag, "strandlab/strandlab:") {
				t.Fatalf("tools/images/build-strandlab.sh printed %q, want strandlab=<tag> last", out)
			}
			size, _ := exec.CommandContext(ctx, "docker", "image", "inspect", "--format", "{{.Size}}", tag).Output()
			t.Logf("image %s: %s bytes, built (or found) in %s", tag, strings.TrimSpace(string(size)), time.Since(begin).Round(time.Second))

			c := s.Provider.Cluster()
			loader, ok := c.(interface {
				LoadImages(context.Context, ...string) error
			})
			if !ok {
				t.Fatalf("the kind cluster (%T) cannot load images", c)
			}
			begin = time.Now()
			if err := loader.LoadImages(ctx, tag); err != nil {
				t.Fatal(err)
			}
			t.Logf("image loaded into every node in %s", time.Since(begin).Round(time.Second))

			// The host side of soakJobReports, writable by the pods' user.
			host = filepath.Join(c.(cluster.StateDirCluster).StateDir(), "csi", filepath.Base(soakJobReports))
			if err := os.MkdirAll(host, 0o777); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(host, 0o777); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("both shards complete, and the merged report's counts are the sum of theirs", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			client := suite.Clientset(t, cfg)
			objs := soakJobObjects(t, tag)
			pvc, shards, merge := objs[1].(*corev1.PersistentVolumeClaim), objs[2].(*batchv1.Job), objs[3].(*batchv1.Job)
			ns = shards.Namespace
			// The claim binds to the PV on the nodes' shared directory.
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: soakJobPV},
				Spec: corev1.PersistentVolumeSpec{
					Capacity:                      pvc.Spec.Resources.Requests,
					AccessModes:                   pvc.Spec.AccessModes,
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					StorageClassName:              "",
					ClaimRef:                      &corev1.ObjectReference{Namespace: pvc.Namespace, Name: pvc.Name},
					PersistentVolumeSource: corev1.PersistentVolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: soakJobReports, Type: ptr(corev1.HostPathDirectory)}},
				},
			}
			if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			pvc.Spec.StorageClassName, pvc.Spec.VolumeName = ptr(""), soakJobPV
			shards.Spec.Completions = ptr(int32(soakJobShards))
			shards.Spec.Parallelism = ptr(int32(soakJobShards))
			setEnv(t, &shards.Spec.Template.Spec.Containers[0], "CYCLES", fmt.Sprint(cycles))
			setEnv(t, &shards.Spec.Template.Spec.Containers[0], "SCENARIO", "scenarios/soak.yaml")
			setEnv(t, &shards.Spec.Template.Spec.Containers[0], "BUILDS", builds)
			// The manifest asks 2 CPUs per shard, the size of the machine
			// the soak's rates were measured on. Here both shards and the
			// kind nodes share one 2-core machine, and each worker offers
			// at most those 2 cores: with the manifest's request the second
			// shard waits for the first. This test is about completing and
			// merging, so the shards ask for half a core and run together.
			shards.Spec.Template.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("500m")
			// A few cycles per build are far from stock's band on the pool:
			// the check is not what this test is about.
			setEnv(t, &merge.Spec.Template.Spec.Containers[0], "CHECK", "false")

			begin := time.Now()
			if err := apply.CreateObjects(ctx, client, objs[0], pvc, shards); err != nil {
				t.Fatal(err)
			}
			waitJob(ctx, t, client, shards, 20*time.Minute)
			t.Logf("shards' Job complete in %s", time.Since(begin).Round(time.Second))
			logShardDurations(ctx, t, client, shards)
			begin = time.Now()
			if err := apply.CreateObjects(ctx, client, merge); err != nil {
				t.Fatal(err)
			}
			waitJob(ctx, t, client, merge, 5*time.Minute)
			t.Logf("merge Job complete in %s", time.Since(begin).Round(time.Second))

			runs := readReports(t, filepath.Join(host, "shards", "reports"), "-soak-shard-")
			merged := readReports(t, filepath.Join(host, "merged", "reports"), "-merge-soak")
			if len(runs) != soakJobShards || len(merged) != 1 {
				t.Fatalf("%d shard reports and %d merged ones, want %d and 1", len(runs), len(merged), soakJobShards)
			}
			checkShards(t, runs, strings.Split(builds, ","), cycles)
			checkMergedSum(t, runs, merged[0])
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if ns != "" {
				deleteNamespace(ctx, t, suite.Clientset(t, cfg), ns)
			}
			if err := suite.Clientset(t, cfg).CoreV1().PersistentVolumes().Delete(ctx, soakJobPV, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Error(err)
			}
			if host != "" {
				if err := os.RemoveAll(host); err != nil {
					t.Error(err)
				}
			}
			return ctx
		}).Feature()
	s.Env.Test(t, f)
}

// soakJobObjects decodes manifests/soak-job with the image tag: the
// namespace, the reports PVC, the shards' Job and the merge Job, in order.
func soakJobObjects(t *testing.T, tag string) []runtime.Object {
	t.Helper()
	var docs [][]byte
	for _, doc := range [][]byte{manifests.SoakJobNamespace, manifests.SoakJobReportsPVC, manifests.SoakJobShards, manifests.SoakJobMerge} {
		docs = append(docs, bytes.ReplaceAll(doc, []byte(manifests.SoakJobImage), []byte(tag)))
	}
	objs, err := apply.Decode(docs...)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 4 {
		t.Fatalf("manifests/soak-job: %d objects, want a namespace, a PVC and two Jobs", len(objs))
	}
	if _, ok := objs[0].(*corev1.Namespace); !ok {
		t.Fatalf("manifests/soak-job/namespace.yaml: %T", objs[0])
	}
	if _, ok := objs[1].(*corev1.PersistentVolumeClaim); !ok {
		t.Fatalf("manifests/soak-job/reports-pvc.yaml: %T", objs[1])
	}
	for _, o := range objs[2:] {
		if _, ok := o.(*batchv1.Job); !ok {
			t.Fatalf("manifests/soak-job: %T, want a Job", o)
		}
	}
	return objs
}

func ptr[T any](v T) *T { return &v }

// setEnv sets the value of the container's variable name, which the
// manifest must define.
func setEnv(t *testing.T, c *corev1.Container, name, value string) {
	t.Helper()
	i := slices.IndexFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == name })
	if i < 0 {
		t.Fatalf("container %s has no %s to set", c.Name, name)
	}
	c.Env[i].Value = value
}

// waitJob waits until the Job completes; it fails the test, with its pods'
// log tails, when the Job fails or the timeout passes first.
func waitJob(ctx context.Context, t *testing.T, client kubernetes.Interface, job *batchv1.Job, timeout time.Duration) {
	t.Helper()
	var last *batchv1.Job
	failed := ""
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		j, err := client.BatchV1().Jobs(job.Namespace).Get(ctx, job.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = j
		for _, c := range j.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				continue
			}
			switch c.Type {
			case batchv1.JobComplete:
				return true, nil
			case batchv1.JobFailed:
				failed = c.Reason + ": " + c.Message
				return true, nil
			}
		}
		return false, nil
	})
	if err == nil && failed == "" {
		return
	}
	state := "never created"
	if last != nil {
		state = fmt.Sprintf("succeeded %d, failed %d, active %d", last.Status.Succeeded, last.Status.Failed, last.Status.Active)
		if idx := last.Status.FailedIndexes; idx != nil {
			state += ", failed indexes " + *idx
		}
	}
	why := "not complete within " + timeout.String()
	if failed != "" {
		why = "failed (" + failed + ")"
	}
	t.Fatalf("Job %s/%s %s: %s\n%s", job.Namespace, job.Name, why, state, podLogs(ctx, client, job))
}

// podLogs is the end of the log of every pod of job.
func podLogs(ctx context.Context, client kubernetes.Interface, job *batchv1.Job) string {
	pods, err := client.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	if err != nil {
		return "pods: " + err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "--- pod %s (phase %s, index %s", p.Name, p.Status.Phase, p.Annotations[batchv1.JobCompletionIndexAnnotation])
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil {
				fmt.Fprintf(&b, ", exit %d %s", term.ExitCode, term.Reason)
			}
		}
		b.WriteString("):\n")
		// A failed run prints its error, then a component's log tail.
		raw, err := client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr(int64(40))}).DoRaw(ctx)
		if err != nil {
			fmt.Fprintf(&b, "(no log: %v; status %+v)\n", err, p.Status.ContainerStatuses)
			continue
		}
		b.Write(raw)
	}
	return b.String()
}

// logShardDurations says how long each shard's container ran.
func logShardDurations(ctx context.Context, t *testing.T, client kubernetes.Interface, job *batchv1.Job) {
	t.Helper()
	pods, err := client.CoreV1().Pods(job.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if term := cs.State.Terminated; term != nil {
				t.Logf("shard %s on %s: exit %d after %s", p.Annotations[batchv1.JobCompletionIndexAnnotation], p.Spec.NodeName,
					term.ExitCode, term.FinishedAt.Sub(term.StartedAt.Time).Round(time.Second))
			}
		}
	}
}

// readReports reads the report.json of every directory under dir whose
// name contains part (latest/, a copy, left out).
func readReports(t *testing.T, dir, part string) []*report.Report {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("reports: %v", err)
	}
	var out []*report.Report
	for _, e := range entries {
		if !e.IsDir() || e.Name() == "latest" || !strings.Contains(e.Name(), part) {
			continue
		}
		r, err := report.Read(filepath.Join(dir, e.Name(), "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// checkShards: every shard ran the local provider to the end with its own
// seed (its completion index) and run id, and every build ran its cycles.
func checkShards(t *testing.T, runs []*report.Report, builds []string, cycles int) {
	t.Helper()
	seeds := map[int64]bool{}
	for _, r := range runs {
		seeds[r.Seed] = true
		if !r.Complete || r.Interrupted || r.Provider != "local" {
			t.Errorf("shard %s: complete %v, interrupted %v, provider %q", r.RunID, r.Complete, r.Interrupted, r.Provider)
		}
		if want := fmt.Sprintf("-soak-shard-%d", r.Seed); !strings.HasSuffix(r.RunID, want) {
			t.Errorf("shard run id %s: want it to end with %s (seed %d)", r.RunID, want, r.Seed)
		}
		var names []string
		for _, b := range r.Builds {
			names = append(names, b.Name)
		}
		if !slices.Equal(names, builds) {
			t.Errorf("shard %s: builds %v, want %v", r.RunID, names, builds)
		}
		for _, b := range r.Builds {
			if b.Cycles != cycles {
				t.Errorf("shard %s, %s: %d cycles, want %d", r.RunID, b.Name, b.Cycles, cycles)
			}
			t.Logf("shard %s, %s: %d cycles, %d stranded, %d safety violations, %.1f cycles/s, run %s (cluster start %.1f s on average)",
				r.RunID, b.Name, b.Cycles, b.Stranded, b.SafetyViolations, b.CyclesPerSecond,
				r.FinishedAt.Sub(r.StartedAt).Round(time.Second), r.ClusterStartSeconds)
		}
	}
	for i := range int64(soakJobShards) {
		if !seeds[i] {
			t.Errorf("no shard ran with seed %d (seeds %v)", i, seeds)
		}
	}
}

// checkMergedSum: the merged report pools exactly the shards, and each
// build's counts are the sums of theirs.
func checkMergedSum(t *testing.T, runs []*report.Report, merged *report.Report) {
	t.Helper()
	var ids []string
	type counts struct{ cycles, notRunning, stranded, episodes, safety, phantom int }
	sum := map[string]counts{}
	for _, r := range runs {
		ids = append(ids, r.RunID)
		for _, b := range r.Builds {
			c := sum[b.Name]
			c.cycles += b.Cycles
			c.notRunning += b.CyclesNotRunning
			c.stranded += b.Stranded
			c.episodes += b.StrandedEpisodes
			c.safety += b.SafetyViolations
			c.phantom += b.PhantomListings
			sum[b.Name] = c
		}
	}
	slices.Sort(ids)
	got := slices.Sorted(slices.Values(merged.MergedFrom))
	if !slices.Equal(got, ids) {
		t.Errorf("merged from %v, want the shards %v", got, ids)
	}
	if len(merged.Builds) != len(sum) {
		t.Errorf("merged report has %d builds, the shards %d", len(merged.Builds), len(sum))
	}
	for _, b := range merged.Builds {
		c := counts{b.Cycles, b.CyclesNotRunning, b.Stranded, b.StrandedEpisodes, b.SafetyViolations, b.PhantomListings}
		if c != sum[b.Name] {
			t.Errorf("merged %s: %+v, want the shards' sum %+v", b.Name, c, sum[b.Name])
		}
		t.Logf("merged %s: %d cycles, %d stranded (%d episodes), %d safety violations, %d phantom listings, %.1f cycles/s",
			b.Name, b.Cycles, b.Stranded, b.StrandedEpisodes, b.SafetyViolations, b.PhantomListings, b.CyclesPerSecond)
	}
}

// deleteNamespace deletes ns and waits until it is gone.
func deleteNamespace(ctx context.Context, t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	if err := client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Errorf("namespace %s not gone within 3m: %v", ns, err)
	}
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
