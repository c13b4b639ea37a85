package kind

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/kind/pkg/cluster/nodes"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/pinning"
	"github.com/strandlab/strandlab/internal/pki"
	"github.com/strandlab/strandlab/internal/proxyadmin"
)

// Ports on the control-plane node, where strandlab's static pods share the
// node's network with kube-apiserver (6443), kube-controller-manager and
// kube-scheduler.
const (
	// proxyPort: kube-controller-manager -> apiproxy -> kube-apiserver.
	proxyPort = 6444
	// proxyAdminPort is mapped to a host port on 127.0.0.1 (RenderConfig),
	// where the harness reads the proxy's counters and journal.
	proxyAdminPort = 6445
	// extenderPort: kube-scheduler -> pin-extender.
	extenderPort = 8888
	// manifestsDir holds the kubelet's static pods.
	manifestsDir = "/etc/kubernetes/manifests"
)

// controlPlane is what the harness changes on the control-plane node after
// kubeadm made it: the throttling proxy in front of kube-apiserver for
// kube-controller-manager, and the pinning extender for kube-scheduler,
// each a static pod, as on the local provider (docs/kind.md).
type controlPlane struct {
	c      *Cluster
	node   nodes.Node
	ca     *pki.CA
	pkiDir string // host path, <state>/pki
	images map[string]string
}

func (c *Cluster) controlPlane(images map[string]string) (*controlPlane, error) {
	all, err := c.kind.ListInternalNodes(c.name)
	if err != nil {
		return nil, fmt.Errorf("list the nodes of kind cluster %s: %w", c.name, err)
	}
	for _, n := range all {
		if role, err := n.Role(); err == nil && role == "control-plane" {
			cp := &controlPlane{c: c, node: n, pkiDir: filepath.Join(c.dir, "pki"), images: images}
			if err := os.MkdirAll(cp.pkiDir, 0o755); err != nil {
				return nil, fmt.Errorf("create the PKI directory of kind cluster %s: %w", c.name, err)
			}
			certPEM, err := cp.read("/etc/kubernetes/pki/ca.crt")
			if err != nil {
				return nil, err
			}
			keyPEM, err := cp.read("/etc/kubernetes/pki/ca.key")
			if err != nil {
				return nil, err
			}
			if cp.ca, err = pki.LoadCA(cp.pkiDir, certPEM, keyPEM); err != nil {
				return nil, fmt.Errorf("kubeadm's CA: %w", err)
			}
			return cp, nil
		}
	}
	return nil, fmt.Errorf("kind cluster %s has no control-plane node", c.name)
}

// inNode is where a file of the host's state directory appears in a node.
func (cp *controlPlane) inNode(hostPath string) string {
	rel, err := filepath.Rel(cp.c.dir, hostPath)
	if err != nil || strings.HasPrefix(rel, "..") {
		panic("kind: " + hostPath + " is not under the state directory " + cp.c.dir)
	}
	return path.Join(nodeStateDir, filepath.ToSlash(rel))
}

func (cp *controlPlane) read(file string) ([]byte, error) {
	out, err := dockerExec(context.Background(), cp.node.String(), nil, "cat", file)
	if err != nil {
		return nil, fmt.Errorf("read %s on %s: %w", file, cp.node, err)
	}
	return out, nil
}

// writeManifest writes a static pod manifest: into a temporary file first,
// then renamed, so the kubelet never reads half of it.
func (cp *controlPlane) writeManifest(name string, pod *corev1.Pod) error {
	data, err := yaml.Marshal(pod)
	if err != nil {
		return fmt.Errorf("encode static pod %s: %w", name, err)
	}
	tmp := "/etc/kubernetes/.strandlab-" + name + ".yaml"
	// nodeutils.WriteFile's way (cp from stdin), without --privileged.
	if _, err := dockerExec(context.Background(), cp.node.String(), bytes.NewReader(data), "cp", "/dev/stdin", tmp); err != nil {
		return fmt.Errorf("write %s on %s: %w", tmp, cp.node, err)
	}
	if _, err := dockerExec(context.Background(), cp.node.String(), nil, "mv", tmp, path.Join(manifestsDir, name+".yaml")); err != nil {
		return fmt.Errorf("install static pod %s on %s: %w", name, cp.node, err)
	}
	return nil
}

// readManifest reads one of kubeadm's static pod manifests.
func (cp *controlPlane) readManifest(name string) (*corev1.Pod, error) {
	data, err := cp.read(path.Join(manifestsDir, name+".yaml"))
	if err != nil {
		return nil, err
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(data, &pod); err != nil {
		return nil, fmt.Errorf("static pod %s: %w", name, err)
	}
	return &pod, nil
}

// The CPU requests of strandlab's static pods: those of the kubeadm
// component each one stands beside (kubeadm's
// controlplane.GetStaticPodSpecs: kube-apiserver 250m, kube-scheduler
// 100m). A pod without one is BestEffort, whose control group gets
// cpu.shares 2 against the control plane's 102–256: on a busy node the
// proxy that every controller request passes then waits for the CPU, and
// the controller's API calls took ten times as long as on the local
// provider, where the proxy is a process like the others (docs/kind.md,
// "The detach after the release").
const (
	apiproxyCPU    = "250m"
	pinExtenderCPU = "100m"
)

// staticPod is a host-network pod of one container, requesting cpu, that
// sees the state directory at /strandlab.
func (cp *controlPlane) staticPod(name, image, cpu string, args []string) *corev1.Pod {
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-system", Labels: map[string]string{"app": name}},
		Spec: corev1.PodSpec{
			HostNetwork:       true,
			PriorityClassName: "system-node-critical",
			Containers: []corev1.Container{{
				Name: name, Image: image, Args: args, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}},
			}},
		},
	}
	mountState(pod)
	return pod
}

// mountState mounts the state directory at /strandlab into the pod's
// first container (once).
func mountState(pod *corev1.Pod) {
	const volume = "strandlab-state"
	if !slices.ContainsFunc(pod.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == volume }) {
		dir := corev1.HostPathDirectory
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: volume,
			VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: nodeStateDir, Type: &dir}}})
		c := &pod.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volume, MountPath: nodeStateDir, ReadOnly: true})
	}
}

// setFlag replaces --name=... in a static pod's command, or appends it.
func setFlag(pod *corev1.Pod, name, value string) {
	c := &pod.Spec.Containers[0]
	flag := "--" + name + "="
	for i, a := range c.Command {
		if strings.HasPrefix(a, flag) {
			c.Command[i] = flag + value
			return
		}
	}
	c.Command = append(c.Command, flag+value)
}

// startProxy runs the throttling proxy as a static pod in front of
// kube-apiserver and points kube-controller-manager at it with its own
// client certificate (the proxy forwards with it, so the API server sees
// the controller, as on the local provider), then waits until the
// controller's requests flow through the proxy.
func (cp *controlPlane) startProxy(ctx context.Context, profile *fault.Profile, admin proxyadmin.Client) error {
	kcmConf, err := cp.read("/etc/kubernetes/controller-manager.conf")
	if err != nil {
		return err
	}
	cfg, err := clientcmd.Load(kcmConf)
	if err != nil {
		return fmt.Errorf("controller-manager.conf: %w", err)
	}
	auth := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo]
	if auth == nil || len(auth.ClientCertificateData) == 0 || len(auth.ClientKeyData) == 0 {
		return fmt.Errorf("controller-manager.conf has no client certificate")
	}
	idCert, idKey := filepath.Join(cp.pkiDir, "kube-controller-manager.crt"), filepath.Join(cp.pkiDir, "kube-controller-manager.key")
	if err := os.WriteFile(idCert, auth.ClientCertificateData, 0o644); err != nil {
		return fmt.Errorf("write kube-controller-manager's client certificate: %w", err)
	}
	if err := os.WriteFile(idKey, auth.ClientKeyData, 0o600); err != nil {
		return fmt.Errorf("write kube-controller-manager's client key: %w", err)
	}
	servingCert, servingKey, err := cp.ca.ServingCert(cp.pkiDir, "apiproxy", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return fmt.Errorf("issue the proxy's serving certificate: %w", err)
	}
	profileFile := filepath.Join(cp.c.dir, "proxy-profile.json")
	data, err := json.Marshal(profile)
	if err != nil {
		return fmt.Errorf("encode the proxy's fault profile: %w", err)
	}
	if err := os.WriteFile(profileFile, data, 0o644); err != nil {
		return fmt.Errorf("write the proxy's fault profile: %w", err)
	}
	kubeconfig := filepath.Join(cp.c.dir, "kube-controller-manager-via-proxy.kubeconfig")
	if err := pki.WriteKubeconfig(kubeconfig, "kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d", proxyPort),
		cp.inNode(cp.ca.CertFile), cp.inNode(idCert), cp.inNode(idKey)); err != nil {
		return fmt.Errorf("write kube-controller-manager's kubeconfig through the proxy: %w", err)
	}
	if err := cp.writeManifest("strandlab-apiproxy", cp.staticPod("strandlab-apiproxy", cp.images["apiproxy"], apiproxyCPU, []string{
		fmt.Sprintf("--bind=127.0.0.1:%d", proxyPort),
		fmt.Sprintf("--admin-bind=0.0.0.0:%d", proxyAdminPort),
		"--tls-cert=" + cp.inNode(servingCert), "--tls-key=" + cp.inNode(servingKey), "--client-ca=" + cp.inNode(cp.ca.CertFile),
		"--upstream=https://127.0.0.1:6443", "--upstream-ca=" + cp.inNode(cp.ca.CertFile),
		"--identity-cert=" + cp.inNode(idCert), "--identity-key=" + cp.inNode(idKey),
		"--profile=" + cp.inNode(profileFile),
	})); err != nil {
		return err
	}
	if err := poll(ctx, 2*time.Minute, "the proxy's admin server answers", admin.Healthz); err != nil {
		return err
	}
	kcm, err := cp.readManifest("kube-controller-manager")
	if err != nil {
		return err
	}
	setFlag(kcm, "kubeconfig", cp.inNode(kubeconfig))
	mountState(kcm)
	if err := cp.writeManifest("kube-controller-manager", kcm); err != nil {
		return err
	}
	// The restarted controller waits for the old one's leader lease to
	// expire (15 s) before it acts.
	return poll(ctx, 3*time.Minute, "kube-controller-manager's requests pass the proxy", func(ctx context.Context) error {
		counters, err := admin.Counters(ctx)
		if err != nil {
			return fmt.Errorf("read the proxy's counters: %w", err)
		}
		for key, n := range counters.Requests {
			if strings.Contains(key, "leases") && n > 0 {
				return nil
			}
		}
		return fmt.Errorf("no lease request through the proxy yet (%d request kinds)", len(counters.Requests))
	})
}

// startExtender runs the pinning extender as a static pod and restarts
// kube-scheduler with a configuration that calls it (the one the local
// provider writes too: pinning.Config.SchedulerConfiguration).
func (cp *controlPlane) startExtender(ctx context.Context, admin kubernetes.Interface, config *pinning.Config) error {
	configFile := filepath.Join(cp.c.dir, "pinning.json")
	data, err := json.Marshal(config)
	if err != nil {
		return fmt.Errorf("encode the pinning configuration: %w", err)
	}
	if err := os.WriteFile(configFile, data, 0o644); err != nil {
		return fmt.Errorf("write the pinning configuration: %w", err)
	}
	// The extender reads PVCs and pods as strandlab:pin-extender (its RBAC
	// is manifests/extender/rbac.yaml).
	kubeconfig, err := cp.ca.Kubeconfig(cp.pkiDir, "pin-extender", "https://127.0.0.1:6443", pki.Identity{CommonName: "strandlab:pin-extender"})
	if err != nil {
		return fmt.Errorf("issue the pin-extender's kubeconfig: %w", err)
	}
	if err := inNodeKubeconfig(kubeconfig, cp.inNode); err != nil {
		return err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", extenderPort)
	if err := cp.writeManifest("strandlab-pin-extender", cp.staticPod("strandlab-pin-extender", cp.images["pin-extender"], pinExtenderCPU, []string{
		"--bind=" + addr, "--kubeconfig=" + cp.inNode(kubeconfig), "--config=" + cp.inNode(configFile),
	})); err != nil {
		return err
	}
	schedConfig := filepath.Join(cp.c.dir, "kube-scheduler.yaml")
	conf := config.SchedulerConfiguration("/etc/kubernetes/scheduler.conf", addr)
	if err := os.WriteFile(schedConfig, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("write the kube-scheduler configuration: %w", err)
	}
	sched, err := cp.readManifest("kube-scheduler")
	if err != nil {
		return err
	}
	setFlag(sched, "config", cp.inNode(schedConfig))
	mountState(sched)
	if err := cp.writeManifest("kube-scheduler", sched); err != nil {
		return err
	}
	// Pods created before the restarted scheduler runs would be placed
	// without the extender: wait for both mirror pods to be Ready, the
	// scheduler's with the new flag.
	return poll(ctx, 3*time.Minute, "kube-scheduler runs with the extender", func(ctx context.Context) error {
		for _, name := range []string{"strandlab-pin-extender", "kube-scheduler"} {
			pod, err := admin.CoreV1().Pods("kube-system").Get(ctx, name+"-"+cp.node.String(), metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get pod kube-system/%s-%s: %w", name, cp.node, err)
			}
			if name == "kube-scheduler" && !slices.Contains(pod.Spec.Containers[0].Command, "--config="+cp.inNode(schedConfig)) {
				return fmt.Errorf("the kube-scheduler pod has not been replaced yet")
			}
			if !podReady(pod) {
				return fmt.Errorf("%s is not Ready", pod.Name)
			}
		}
		return nil
	})
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// inNodeKubeconfig rewrites the certificate paths of a kubeconfig written
// on the host to the node's view of the state directory.
func inNodeKubeconfig(file string, inNode func(string) string) error {
	cfg, err := clientcmd.LoadFromFile(file)
	if err != nil {
		return fmt.Errorf("load kubeconfig %s to rewrite its paths for the nodes: %w", file, err)
	}
	for _, cl := range cfg.Clusters {
		cl.CertificateAuthority = inNode(cl.CertificateAuthority)
	}
	for _, a := range cfg.AuthInfos {
		a.ClientCertificate, a.ClientKey = inNode(a.ClientCertificate), inNode(a.ClientKey)
	}
	return clientcmd.WriteToFile(*cfg, file)
}

// poll calls check every half second until it succeeds or timeout passes;
// the error names what was awaited and the last failure.
func poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) error) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = check(ctx)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("waiting until %s: %w (last: %v)", what, err, last)
	}
	return nil
}
