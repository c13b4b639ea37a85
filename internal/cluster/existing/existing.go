// Package existing is the cluster provider for a cluster strandlab did not
// create, reached through a kubeconfig: it measures that cluster's own
// attach/detach controller under churn. It works only with the cluster
// owner's explicit consent (Provider.Consent, --cluster-owner-consent), only
// in a namespace it creates and labels, refuses what it cannot do on a
// cluster it does not own (a proxy with faults, the pinning extender, a
// controller build: Capabilities, which cluster.CheckSpec reads), and on Stop leaves the cluster as it found
// it: the namespace, its PersistentVolumes and their VolumeAttachments gone
// (docs/existing.md).
package existing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/strandlab/strandlab/internal/cluster"
	"github.com/strandlab/strandlab/internal/provenance"
)

// Name is what a scenario's cluster.provider says to choose this provider.
const Name = "existing"

// ConsentFlag is the flag of `strandlab run` that sets Provider.Consent.
const ConsentFlag = "--cluster-owner-consent"

// Labels on the namespace the provider creates.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "strandlab"
	// LabelRun is the cluster spec's name: <scenario>-<build>.
	LabelRun = "strandlab.io/run"
)

const (
	// versionTimeout bounds Available's request of /version.
	versionTimeout = 10 * time.Second
	// downRequestTimeout bounds each of Down's requests.
	downRequestTimeout = 30 * time.Second
	// DefaultCleanupTimeout bounds Stop's wait for the namespace, its
	// volumes and their attachments to be gone.
	DefaultCleanupTimeout = 5 * time.Minute
	cleanupPoll           = time.Second
	// DefaultNodeWait bounds Start's wait for enough schedulable nodes.
	DefaultNodeWait = time.Minute
)

// Provider runs scenarios on the cluster a kubeconfig names.
type Provider struct {
	// Kubeconfig is the path of the cluster's kubeconfig (its current
	// context is used). There is no fallback to ~/.kube/config: the user
	// names the cluster.
	Kubeconfig string
	// Consent is --cluster-owner-consent: the cluster's owner agrees that
	// strandlab creates a namespace there, churns StatefulSet pods and
	// their volumes in it, and deletes it afterwards. Without it the
	// provider is not available, and nothing is touched.
	Consent bool
	// Progress receives progress lines (may be nil).
	Progress io.Writer
	// CleanupTimeout bounds Stop's wait (default DefaultCleanupTimeout).
	CleanupTimeout time.Duration
	// NodeWait bounds Start's wait for cluster.nodes schedulable nodes
	// (default DefaultNodeWait).
	NodeWait time.Duration
}

var (
	_ cluster.Provider        = (*Provider)(nil)
	_ cluster.SpecChecker     = (*Provider)(nil)
	_ cluster.DownArgsCluster = (*Cluster)(nil)
)

func (p *Provider) Name() string { return Name }

// Capabilities: see the package variable.
func (p *Provider) Capabilities() cluster.Capabilities { return Capabilities }

// errNoStateDir: a kept run of the existing provider is a namespace on a
// cluster, not a directory here.
var errNoStateDir = errors.New("the existing provider keeps no state directory: remove a kept run's namespace with strandlab down --kubeconfig FILE --namespace NS")

// PlanDown refuses: see errNoStateDir (the package function Down removes a
// kept run's namespace).
func (p *Provider) PlanDown(context.Context, string) (fmt.Stringer, error) {
	return nil, errNoStateDir
}

// Down refuses: see errNoStateDir.
func (p *Provider) Down(context.Context, string) error { return errNoStateDir }

// CheckSpec: see the package function.
func (p *Provider) CheckSpec(spec cluster.Spec) error { return CheckSpec(spec) }

// Available checks, in order, that the cluster owner's consent was given,
// that the kubeconfig is given and readable, and that its API server
// answers /version within 10 s. It creates nothing.
func (p *Provider) Available(ctx context.Context) error {
	if !p.Consent {
		return fmt.Errorf("%s not given: the existing provider creates a namespace on the cluster your kubeconfig names, "+
			"creates StatefulSets there and deletes their pods over and over (their volumes are attached and detached each time), "+
			"then deletes the namespace with its volumes. Pass %s (make: CLUSTER_OWNER_CONSENT=1) only for a cluster whose owner agrees to that", ConsentFlag, ConsentFlag)
	}
	cfg, err := restConfig(p.Kubeconfig)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	if _, err := serverVersion(ctx, client); err != nil {
		return fmt.Errorf("the API server %s (kubeconfig %s) does not answer /version within %v: %w", server(cfg), p.Kubeconfig, versionTimeout, err)
	}
	return nil
}

// restConfig reads the kubeconfig at path (its current context).
func restConfig(path string) (*rest.Config, error) {
	switch {
	case path == "":
		return nil, errors.New("no kubeconfig: name the cluster's with --kubeconfig FILE or KUBECONFIG=FILE (the existing provider does not fall back to ~/.kube/config)")
	case strings.ContainsRune(path, os.PathListSeparator):
		return nil, fmt.Errorf("kubeconfig %q lists several files: name one with --kubeconfig FILE", path)
	}
	if _, err := os.ReadFile(path); err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	return cfg, nil
}

// server is the API server's URL as errors name it: without any user
// information a URL might carry.
func server(cfg *rest.Config) string {
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "(unparsable server URL)"
	}
	u.User = nil
	return u.String()
}

func serverVersion(ctx context.Context, client kubernetes.Interface) (*version.Info, error) {
	var v version.Info
	body, err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Raw()
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("/version: %w", err)
	}
	return &v, nil
}

// Prepare: an existing cluster needs nothing built; the provider starts
// (checks and adopts) clusters itself.
func (p *Provider) Prepare(context.Context) (cluster.Starter, error) { return p, nil }

// Start checks the cluster (access, schedulable nodes, the storage class,
// that the namespace and no volume claimed from it exist yet) and creates
// the labelled namespace: the last step, so a failing check leaves nothing.
func (p *Provider) Start(ctx context.Context, spec cluster.Spec) (cluster.Cluster, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	if err := cluster.CheckSpec(p, spec); err != nil {
		return nil, fmt.Errorf("the existing provider cannot run this spec:\n%w", err)
	}
	progress := p.Progress
	if progress == nil {
		progress = io.Discard
	}
	begin := time.Now()
	cfg, err := restConfig(p.Kubeconfig)
	if err != nil {
		return nil, err
	}
	// The harness's own clients are not held to client-go's 5 QPS (it
	// would distort timings), but stay modest on a shared cluster.
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	srv := server(cfg)
	v, err := serverVersion(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("the API server %s: /version: %w", srv, err)
	}
	c, err := p.start(ctx, client, srv, v.GitVersion, spec, progress)
	if err != nil {
		return nil, err
	}
	c.restConfig = cfg
	c.started = time.Since(begin)
	return c, nil
}

// start is Start after connecting: the checks and the namespace, through
// client (a fake one in unit tests).
func (p *Provider) start(ctx context.Context, client kubernetes.Interface, srv, version string, spec cluster.Spec, progress io.Writer) (*Cluster, error) {
	if progress == nil {
		progress = io.Discard
	}
	if err := checkAccess(ctx, client, spec.Namespace); err != nil {
		return nil, fmt.Errorf("the API server %s: %w", srv, err)
	}

	ns := spec.Namespace
	if _, err := client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
		return nil, fmt.Errorf("namespace %s already exists on the cluster at %s: the existing provider works only in a namespace it creates. "+
			"If an earlier strandlab run left it, remove it with `strandlab down --kubeconfig %s --namespace %s`; otherwise it is not strandlab's to use",
			ns, srv, p.Kubeconfig, ns)
	} else if !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("get namespace %s: %w", ns, err)
	}
	pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	if left := ClaimedFrom(ns, pvs.Items); len(left) > 0 {
		return nil, fmt.Errorf("PersistentVolumes claimed from namespace %s exist on the cluster at %s (%s): a run could not tell its volumes from them. "+
			"If an earlier strandlab run left them, `strandlab down --kubeconfig %s --namespace %s` waits for them to go", ns, srv, strings.Join(left, ", "), p.Kubeconfig, ns)
	}

	sc, err := client.StorageV1().StorageClasses().Get(ctx, spec.StorageClass, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		classes, lerr := client.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
		if lerr != nil {
			return nil, fmt.Errorf("cluster.storageClass: %q: no such StorageClass, and listing the classes failed: %w", spec.StorageClass, lerr)
		}
		return nil, fmt.Errorf("cluster.storageClass: %q: no such StorageClass on the cluster at %s (it has: %s)", spec.StorageClass, srv, ClassNames(classes.Items))
	} else if err != nil {
		return nil, fmt.Errorf("cluster.storageClass: %w", err)
	}
	drivers, err := client.StorageV1().CSIDrivers().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list CSIDrivers: %w", err)
	}
	warning, err := CheckStorageClass(sc, drivers.Items)
	if err != nil {
		return nil, err
	}

	nodes, kubelets, err := p.waitForNodes(ctx, client, spec.Nodes, srv, progress)
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(progress, ">> existing: API server %s (Kubernetes %s), %d schedulable nodes, StorageClass %s (provisioner %s)\n",
		srv, version, len(nodes), sc.Name, sc.Provisioner)
	if warning != "" {
		fmt.Fprintf(progress, ">> existing: warning: %s\n", warning)
	}
	if ProxyIgnored(spec) {
		fmt.Fprintf(progress, ">> existing: proxy: {} holds nothing back; running without a proxy (the cluster's controller talks to its API server directly)\n")
	}
	created, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   ns,
		Labels: map[string]string{LabelManagedBy: ManagedBy, LabelRun: RunLabel(spec.Name)},
		Annotations: map[string]string{"strandlab.io/note": "created by strandlab run --provider existing; deleted with everything in it when the run ends " +
			"(or: strandlab down --kubeconfig FILE --namespace " + ns + ")"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create namespace %s: %w", ns, err)
	}
	c := &Cluster{kubeconfig: p.Kubeconfig, client: client, namespace: ns, nsUID: created.UID, server: srv,
		nodes: nodes, version: version, keep: spec.Keep, progress: progress, cleanupTimeout: p.CleanupTimeout}
	c.components = []provenance.Component{
		{Name: "kube-apiserver", Version: version, Provenance: "the existing cluster's (discovery /version)"},
		{Name: "kubelet", Version: strings.Join(kubelets, ", "), Provenance: "the existing cluster's schedulable nodes (status.nodeInfo.kubeletVersion)"},
		{Name: "kube-controller-manager", Version: "unknown", Provenance: "the existing cluster's own; its version is not visible through the API"},
		{Name: "csi-driver", Version: sc.Provisioner, Provenance: "the existing cluster's, provisioner of StorageClass " + sc.Name},
	}
	fmt.Fprintf(progress, ">> existing: created namespace %s (label %s=%s); it is deleted with its volumes when the run ends\n", ns, LabelManagedBy, ManagedBy)
	klog.V(1).InfoS("Existing cluster checked, namespace created", "server", srv, "version", version, "nodes", len(nodes), "namespace", ns, "storageClass", sc.Name)
	return c, nil
}

// waitForNodes returns the schedulable nodes (and their kubelets'
// versions) once there are at least want, polling for at most the
// provider's NodeWait: a node that has just joined (or blinked) carries a
// not-ready taint for a few seconds.
func (p *Provider) waitForNodes(ctx context.Context, client kubernetes.Interface, want int, srv string, progress io.Writer) (nodes, kubelets []string, err error) {
	timeout := p.NodeWait
	if timeout <= 0 {
		timeout = DefaultNodeWait
	}
	var all int
	var lastErr error
	said := false
	err = wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			lastErr = err
			return false, nil
		}
		lastErr = nil
		all = len(list.Items)
		nodes, kubelets = Schedulable(list.Items)
		if len(nodes) >= want {
			return true, nil
		}
		if !said {
			fmt.Fprintf(progress, ">> existing: %d of %d nodes schedulable, %d needed (cluster.nodes); waiting up to %v\n", len(nodes), all, want, timeout)
			said = true
		}
		return false, nil
	})
	if lastErr != nil {
		return nil, nil, fmt.Errorf("list nodes: %w", lastErr)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("cluster.nodes: the scenario needs %d schedulable nodes; the cluster at %s has %d (Ready, not cordoned, no NoSchedule/NoExecute taint) of %d after %v: %s",
			want, srv, len(nodes), all, timeout, strings.Join(nodes, ", "))
	}
	return nodes, kubelets, nil
}

// access is one permission a run needs; namespaced ones are checked in the
// namespace the run will create.
type access struct {
	verb, group, resource string
	namespaced            bool
}

var needed = []access{
	{"create", "", "namespaces", false}, {"delete", "", "namespaces", false}, {"get", "", "namespaces", false},
	{"list", "", "nodes", false}, {"watch", "", "nodes", false},
	{"list", "", "persistentvolumes", false}, {"watch", "", "persistentvolumes", false},
	{"list", "storage.k8s.io", "volumeattachments", false}, {"watch", "storage.k8s.io", "volumeattachments", false},
	{"list", "storage.k8s.io", "csidrivers", false}, {"watch", "storage.k8s.io", "csidrivers", false},
	{"get", "storage.k8s.io", "storageclasses", false},
	{"create", "apps", "statefulsets", true}, {"create", "", "services", true}, {"get", "", "serviceaccounts", true},
	{"list", "", "pods", true}, {"watch", "", "pods", true}, {"delete", "", "pods", true},
	{"list", "", "persistentvolumeclaims", true}, {"watch", "", "persistentvolumeclaims", true},
}

// checkAccess asks the API server (SelfSubjectAccessReview) whether the
// kubeconfig's user may do what a run does, and names what it may not:
// better refused now than failing halfway, or unable to delete the
// namespace at the end.
func checkAccess(ctx context.Context, client kubernetes.Interface, namespace string) error {
	var missing []string
	for _, a := range needed {
		attr := &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource}
		if a.namespaced {
			attr.Namespace = namespace
		}
		r, err := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx,
			&authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: attr}}, metav1.CreateOptions{})
		if err != nil {
			return fmt.Errorf("access review: %w", err)
		}
		if !r.Status.Allowed {
			what := a.resource
			if a.group != "" {
				what += "." + a.group
			}
			if a.namespaced {
				what += " in " + namespace
			}
			missing = append(missing, a.verb+" "+what)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the kubeconfig's user may not: %s (docs/existing.md lists what a run needs)", strings.Join(missing, "; "))
	}
	return nil
}

// Cluster is an existing cluster with strandlab's namespace on it.
type Cluster struct {
	kubeconfig     string
	restConfig     *rest.Config
	client         kubernetes.Interface
	namespace      string
	nsUID          types.UID
	server         string
	nodes          []string
	components     []provenance.Component
	version        string
	started        time.Duration
	keep           bool
	progress       io.Writer
	cleanupTimeout time.Duration

	stopOnce sync.Once
	stopErr  error
}

// Kubeconfig is the path the provider was given.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// RESTConfig is the kubeconfig's, with the harness's QPS.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// Nodes are the nodes that were schedulable when the run started.
func (c *Cluster) Nodes() []string { return append([]string(nil), c.nodes...) }

// Components are what the API shows of the cluster: the API server's
// version, the kubelets', the storage class's driver; the controller's
// version is not visible and says so.
func (c *Cluster) Components() []provenance.Component {
	return append([]provenance.Component(nil), c.components...)
}

func (c *Cluster) KubernetesVersion() string { return c.version }

// StartDuration is the time Start took to connect, check the cluster and
// create the namespace.
func (c *Cluster) StartDuration() time.Duration { return c.started }

// Namespace is the namespace the run created.
func (c *Cluster) Namespace() string { return c.namespace }

// DownArgs are the `strandlab down` arguments that remove a kept run.
func (c *Cluster) DownArgs() []string {
	return []string{"--kubeconfig", c.kubeconfig, "--namespace", c.namespace}
}

// Stop leaves the cluster as the run found it, unless kept: it deletes the
// namespace (only the one Start created: its UID is a precondition) and
// waits until the namespace, every PersistentVolume claimed from it and
// every VolumeAttachment of those volumes are gone, at most the provider's
// CleanupTimeout (or ctx's deadline, if nearer); then it names what is
// left. Safe to call more than once.
func (c *Cluster) Stop(ctx context.Context) error {
	c.stopOnce.Do(func() {
		if c.keep {
			return
		}
		c.stopErr = cleanup(ctx, c.client, c.namespace, c.nsUID, c.cleanupTimeout, c.progress)
	})
	return c.stopErr
}

// cleanup deletes namespace (with uid as precondition, when given) and
// waits for it, its claimed PersistentVolumes and their VolumeAttachments
// to be gone.
func cleanup(ctx context.Context, client kubernetes.Interface, namespace string, uid types.UID, timeout time.Duration, progress io.Writer) error {
	if timeout <= 0 {
		timeout = DefaultCleanupTimeout
	}
	if progress == nil {
		progress = io.Discard
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	begin := time.Now()
	ours := map[string]bool{}
	// The volumes claimed from the namespace are noted before it goes, so
	// that their attachments are found even after the volumes are gone.
	if _, err := leftovers(ctx, client, namespace, ours); err != nil {
		return err
	}
	fmt.Fprintf(progress, ">> existing: deleting namespace %s; waiting until it, its %d PersistentVolume(s) and their VolumeAttachments are gone\n", namespace, len(ours))
	opts := metav1.DeleteOptions{}
	if uid != "" {
		opts.Preconditions = &metav1.Preconditions{UID: &uid}
	}
	if err := client.CoreV1().Namespaces().Delete(ctx, namespace, opts); apierrors.IsConflict(err) {
		return fmt.Errorf("namespace %s is not the one this run created (another UID): not deleting it", namespace)
	} else if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete namespace %s: %w", namespace, err)
	}
	var left []string
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, cleanupPoll, true, func(ctx context.Context) (bool, error) {
		l, err := leftovers(ctx, client, namespace, ours)
		if err != nil {
			lastErr = err
			return false, nil
		}
		left, lastErr = l, nil
		return len(left) == 0, nil
	})
	if err != nil {
		if lastErr != nil {
			left = append(left, "(last check failed: "+lastErr.Error()+")")
		}
		return fmt.Errorf("namespace %s not cleaned up within %v; left: %s", namespace, time.Since(begin).Round(time.Second), strings.Join(left, "; "))
	}
	fmt.Fprintf(progress, ">> existing: namespace %s, its volumes and attachments are gone (%.1fs)\n", namespace, time.Since(begin).Seconds())
	klog.V(1).InfoS("Existing cluster cleaned up", "namespace", namespace, "seconds", time.Since(begin).Seconds())
	return nil
}

// leftovers reads what Leftovers judges.
func leftovers(ctx context.Context, client kubernetes.Interface, namespace string, ours map[string]bool) ([]string, error) {
	ns, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		ns = nil
	} else if err != nil {
		return nil, fmt.Errorf("get namespace %s: %w", namespace, err)
	}
	pvs, err := client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list PersistentVolumes: %w", err)
	}
	vas, err := client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list VolumeAttachments: %w", err)
	}
	return Leftovers(namespace, ns, pvs.Items, vas.Items, ours), nil
}

// Down removes what a kept run (or a killed one) left on the cluster the
// kubeconfig names: it deletes namespace, only if strandlab created it
// (label app.kubernetes.io/managed-by=strandlab), and waits as Stop does.
// A namespace already gone is fine: Down still waits for its volumes.
func Down(ctx context.Context, kubeconfig, namespace string, progress io.Writer) error {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	// Down makes only single requests (gets, deletes, lists while it
	// polls): each gets a time limit, so a server that accepts and never
	// answers fails Down instead of hanging it.
	cfg.Timeout = downRequestTimeout
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	vctx, cancel := context.WithTimeout(ctx, versionTimeout)
	defer cancel()
	if _, err := serverVersion(vctx, client); err != nil {
		return fmt.Errorf("the API server %s (kubeconfig %s) does not answer /version within %v: %w", server(cfg), kubeconfig, versionTimeout, err)
	}
	return down(ctx, client, namespace, DefaultCleanupTimeout, progress)
}

func down(ctx context.Context, client kubernetes.Interface, namespace string, timeout time.Duration, progress io.Writer) error {
	var uid types.UID
	ns, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return fmt.Errorf("get namespace %s: %w", namespace, err)
	case ns.Labels[LabelManagedBy] != ManagedBy:
		return fmt.Errorf("namespace %s was not created by strandlab (it lacks the label %s=%s): not deleting it", namespace, LabelManagedBy, ManagedBy)
	default:
		uid = ns.UID
	}
	return cleanup(ctx, client, namespace, uid, timeout, progress)
}
