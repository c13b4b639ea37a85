package kind

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/vladimirvivien/gexe"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/strandlab/strandlab/internal/cluster/apply"
	"github.com/strandlab/strandlab/manifests"
)

// buildImages builds (or finds) the FROM-scratch images of the programs that
// run in the cluster (tools/images/build.sh) and returns name -> tag.
func (p *Provider) buildImages(ctx context.Context, progress io.Writer) (map[string]string, error) {
	stdout, err := p.runScript(ctx, progress, "tools/images/build.sh", "build the in-cluster images")
	if err != nil {
		return nil, err
	}
	images := map[string]string{}
	for _, line := range strings.Fields(stdout) {
		if name, tag, ok := strings.Cut(line, "="); ok {
			images[name] = tag
		}
	}
	for _, name := range []string{"csi-driver", "csi-attacher", "csi-provisioner"} {
		if images[name] == "" {
			return nil, fmt.Errorf("tools/images/build.sh built no %s image", name)
		}
	}
	return images, nil
}

// runScript runs one of the repository's build scripts with the output
// directory as its argument: progress (stderr) goes to progress, stdout is
// returned; a failure carries the script's last lines.
func (p *Provider) runScript(ctx context.Context, progress io.Writer, script, what string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(p.RepoRoot, script), filepath.Join(p.RepoRoot, "_output"))
	cmd.Dir = p.RepoRoot
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(progress, &stderr)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s (%s): %w: %s", what, script, err, lastLines(stderr.String(), 5))
	}
	return stdout.String(), nil
}

// loadImages loads the in-cluster programs' images into every node.
func (c *Cluster) loadImages(ctx context.Context, images map[string]string) error {
	tags := make([]string, 0, len(images))
	for _, tag := range images {
		tags = append(tags, tag)
	}
	sort.Strings(tags)
	return c.LoadImages(ctx, tags...)
}

// LoadImages saves the images tags (of the host's Docker) once and imports
// them into every node's containerd with `kind load image-archive` (its
// node commands need kind's environment: kindCLI), so pods can run them
// without a registry.
func (c *Cluster) LoadImages(ctx context.Context, tags ...string) error {
	f, err := os.CreateTemp(c.dir, "images-*.tar")
	if err != nil {
		return fmt.Errorf("create temporary image archive in %s: %w", c.dir, err)
	}
	archive := f.Name()
	f.Close()
	defer os.Remove(archive)
	if proc := gexe.RunProcWithContext(ctx, "docker save -o "+archive+" "+strings.Join(tags, " ")); !proc.IsSuccess() {
		return fmt.Errorf("docker save %s: %s", strings.Join(tags, " "), firstLine(proc.Result()))
	}
	if err := c.cli.run(ctx, "load", "image-archive", archive, "--name", c.name); err != nil {
		return fmt.Errorf("load images into the nodes of kind cluster %s: %w", c.name, err)
	}
	return nil
}

// csiManifest is manifests/kind/csi.yaml with the built image tags, the
// scenario's driver name and extra flags for every csi-driver container
// (the scenario's CSI faults, csidriver.FaultArgs).
func csiManifest(images map[string]string, driver string, driverArgs []string) []byte {
	doc := string(manifests.KindCSI)
	for name, tag := range images {
		doc = strings.ReplaceAll(doc, "image: strandlab/"+name+":dev", "image: "+tag)
	}
	if len(driverArgs) > 0 {
		// Every csi-driver container's flow list of args ends with its
		// state directory; YAML single quotes keep a flag's JSON as it is.
		quoted := make([]string, len(driverArgs))
		for i, a := range driverArgs {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", "''") + "'"
		}
		doc = strings.ReplaceAll(doc, csiStateDirArg+"]", csiStateDirArg+", "+strings.Join(quoted, ", ")+"]")
	}
	return []byte(strings.ReplaceAll(doc, manifests.CSIDriverName, driver))
}

// csiStateDirArg is the last flag of each csi-driver container in
// manifests/kind/csi.yaml.
const csiStateDirArg = "--state-dir=/strandlab-csi"

// startCSI creates the CSI driver's objects and waits until the controller
// is available and every worker's kubelet has registered the driver
// (CSINode lists it): only then can a volume be attached and mounted.
func (c *Cluster) startCSI(ctx context.Context, admin kubernetes.Interface, images map[string]string, driver string, driverArgs []string) error {
	driverObjects := bytes.ReplaceAll(manifests.CSIDriver, []byte(manifests.CSIDriverName), []byte(driver))
	if err := apply.Create(ctx, admin, manifests.CSIRBAC, driverObjects, csiManifest(images, driver, driverArgs)); err != nil {
		return fmt.Errorf("create the CSI driver's objects: %w", err)
	}
	var last string
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := admin.AppsV1().Deployments("kube-system").Get(ctx, "strandlab-csi-controller", metav1.GetOptions{})
		if err != nil || !deploymentAvailable(d) {
			last = "the controller (csi-driver, csi-attacher, csi-provisioner) is not available"
			return false, nil
		}
		for _, node := range c.nodes {
			csiNode, err := admin.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				last = fmt.Sprintf("no CSINode %s yet", node)
				return false, nil
			}
			registered := false
			for _, d := range csiNode.Spec.Drivers {
				registered = registered || d.Name == driver
			}
			if !registered {
				last = fmt.Sprintf("the kubelet of %s has not registered %s", node, driver)
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("CSI driver not ready: %w (%s)", err, last)
	}
	return nil
}

// upstreamCSIManifest is manifests/kind/csi-hostpath-upstream.yaml under the
// scenario's driver name.
func upstreamCSIManifest(driver string) []byte {
	return bytes.ReplaceAll(manifests.KindCSIUpstream, []byte(manifests.CSIDriverName), []byte(driver))
}

// startUpstreamCSI deploys upstream's csi-driver-host-path (run
// --csi-driver upstream) and waits until its one replica is ready and the
// kubelet of its node has registered the driver. Its images come from
// registry.k8s.io: without a registry (this project's build machine) the
// pod never starts and the wait names the cause.
func (c *Cluster) startUpstreamCSI(ctx context.Context, admin kubernetes.Interface, _ map[string]string, driver string) error {
	driverObjects := bytes.ReplaceAll(manifests.CSIDriver, []byte(manifests.CSIDriverName), []byte(driver))
	if err := apply.Create(ctx, admin, manifests.CSIRBAC, driverObjects, upstreamCSIManifest(driver)); err != nil {
		return fmt.Errorf("create the upstream CSI driver's objects: %w", err)
	}
	last := "the StatefulSet kube-system/csi-hostpath-upstream has no ready replica"
	err := wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := admin.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "app=csi-hostpath-upstream"})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		p := pods.Items[0]
		for _, st := range p.Status.ContainerStatuses {
			if w := st.State.Waiting; w != nil && w.Reason != "" {
				last = fmt.Sprintf("pod %s: container %s is waiting: %s %s", p.Name, st.Name, w.Reason, w.Message)
				return false, nil
			}
		}
		if p.Spec.NodeName == "" || p.Status.Phase != "Running" {
			last = fmt.Sprintf("pod %s is %s", p.Name, p.Status.Phase)
			return false, nil
		}
		csiNode, err := admin.StorageV1().CSINodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, d := range csiNode.Spec.Drivers {
			if d.Name == driver {
				return true, nil
			}
		}
		last = fmt.Sprintf("the kubelet of %s has not registered %s", p.Spec.NodeName, driver)
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("upstream CSI driver (--csi-driver upstream) not ready: %w (%s)", err, last)
	}
	return nil
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status == "True" {
			return d.Status.AvailableReplicas >= 1
		}
	}
	return false
}
