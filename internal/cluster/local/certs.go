package local

import (
	"net"
	"os"
	"path/filepath"

	"github.com/strandlab/strandlab/internal/apfcount"
	"github.com/strandlab/strandlab/internal/pki"
)

// clusterPKI are the credential files of one cluster.
type clusterPKI struct {
	caFile, caKey           string
	servingCert, servingKey string
	saKey                   string
	admin                   string // kubeconfig, system:masters
	controllerManager       string // kubeconfig, system:kube-controller-manager
	scheduler               string // kubeconfig, system:kube-scheduler
	csiAttacher             string // kubeconfig, strandlab:csi-attacher
	csiProvisioner          string // kubeconfig, strandlab:csi-provisioner
	pinExtender             string // kubeconfig, strandlab:pin-extender
	nodes                   map[string]string
	// The throttling proxy's serving certificate, and the controller
	// manager's client certificate it forwards with.
	proxyCert, proxyKey string
	kcmCert, kcmKey     string
	// identities are the client identities issued here, by the client the
	// report counts their API requests for (apf.go).
	identities []apfcount.Identity
}

// writePKI issues one identity per component so that each is authorized as
// in a real cluster: RBAC for the control plane and the CSI sidecars, the
// Node authorizer and NodeRestriction for each kubelet.
func writePKI(dir, server string, nodes []string) (*clusterPKI, error) {
	pkiDir := filepath.Join(dir, "pki")
	if err := mkdir(pkiDir); err != nil {
		return nil, err
	}
	ca, err := pki.NewCA(pkiDir, "strandlab-ca")
	if err != nil {
		return nil, err
	}
	out := &clusterPKI{caFile: ca.CertFile, caKey: filepath.Join(pkiDir, "ca.key"), nodes: map[string]string{}}
	out.servingCert, out.servingKey, err = ca.ServingCert(pkiDir, "kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		[]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.96.0.1")})
	if err != nil {
		return nil, err
	}
	out.proxyCert, out.proxyKey, err = ca.ServingCert(pkiDir, "apiproxy", []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")})
	if err != nil {
		return nil, err
	}
	if out.saKey, err = pki.ServiceAccountKey(pkiDir); err != nil {
		return nil, err
	}
	ids := []struct {
		dst    *string
		name   string
		id     pki.Identity
		client string // whose requests these are, in the report
	}{
		{&out.admin, "admin", pki.Identity{CommonName: "strandlab-admin", Organization: []string{"system:masters"}}, "harness"},
		{&out.controllerManager, "kube-controller-manager", pki.Identity{CommonName: "system:kube-controller-manager"}, "kube-controller-manager"},
		{&out.scheduler, "kube-scheduler", pki.Identity{CommonName: "system:kube-scheduler"}, "kube-scheduler"},
		{&out.csiAttacher, "csi-attacher", pki.Identity{CommonName: "strandlab:csi-attacher"}, "csi-attacher"},
		{&out.csiProvisioner, "csi-provisioner", pki.Identity{CommonName: "strandlab:csi-provisioner"}, "csi-provisioner"},
		{&out.pinExtender, "pin-extender", pki.Identity{CommonName: "strandlab:pin-extender"}, "pin-extender"},
	}
	for _, i := range ids {
		if *i.dst, err = ca.Kubeconfig(pkiDir, i.name, server, i.id); err != nil {
			return nil, err
		}
		out.identities = append(out.identities, apfcount.User(i.client, i.client, i.id.CommonName, i.id.Organization...))
	}
	// Every kubelet is system:node:<name> in system:nodes, and only they are.
	out.identities = append(out.identities, apfcount.Group("kubelet-sim", "kubelet-sim", "system:nodes", "system:node:"))
	out.kcmCert, out.kcmKey = filepath.Join(pkiDir, "kube-controller-manager.crt"), filepath.Join(pkiDir, "kube-controller-manager.key")
	for _, n := range nodes {
		if out.nodes[n], err = ca.Kubeconfig(pkiDir, n, server, pki.Identity{CommonName: "system:node:" + n, Organization: []string{"system:nodes"}}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func mkdir(dir string) error { return os.MkdirAll(dir, 0o700) }
