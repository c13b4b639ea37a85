package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"

	"github.com/strandlab/strandlab/internal/pki"
	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/internal/proxy"
)

// startProxy starts the throttling proxy in front of the API server and
// writes the kubeconfig kube-controller-manager uses to reach it: the same
// client certificate, another server.
func (p *Provider) startProxy(c *Cluster, profile *proxy.Profile, cfg *clusterPKI, upstream, logDir string, port, adminPort int) (readiness, string, error) {
	profileFile := filepath.Join(c.dir, "proxy-profile.json")
	data, err := json.Marshal(profile)
	if err != nil {
		return readiness{}, "", err
	}
	if err := os.WriteFile(profileFile, data, 0o644); err != nil {
		return readiness{}, "", err
	}
	c.proxyAdmin = fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	proc, err := c.procs.Start(process.Spec{Name: "apiproxy", Path: p.Binaries.APIProxy, LogFile: filepath.Join(logDir, "apiproxy.log"), Args: []string{
		fmt.Sprintf("--bind=127.0.0.1:%d", port),
		fmt.Sprintf("--admin-bind=127.0.0.1:%d", adminPort),
		"--tls-cert=" + cfg.proxyCert, "--tls-key=" + cfg.proxyKey, "--client-ca=" + cfg.caFile,
		"--upstream=" + upstream, "--upstream-ca=" + cfg.caFile,
		"--identity-cert=" + cfg.kcmCert, "--identity-key=" + cfg.kcmKey,
		"--profile=" + profileFile,
	}})
	if err != nil {
		return readiness{}, "", err
	}
	kubeconfig := filepath.Join(c.dir, "pki", "kube-controller-manager-via-proxy.kubeconfig")
	if err := pki.WriteKubeconfig(kubeconfig, "kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d", port), cfg.caFile, cfg.kcmCert, cfg.kcmKey); err != nil {
		return readiness{}, "", err
	}
	return readiness{proc, httpGetOK(c.proxyAdmin+"/healthz", nil)}, kubeconfig, nil
}

// ProxyCounters reads the proxy's counters.
func (c *Cluster) ProxyCounters(ctx context.Context) (proxy.Counters, error) {
	if c.proxyAdmin == "" {
		return proxy.Counters{}, errors.New("this cluster runs without the proxy")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.proxyAdmin+"/strandlab/counters", nil)
	if err != nil {
		return proxy.Counters{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return proxy.Counters{}, err
	}
	defer resp.Body.Close()
	var out proxy.Counters
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("proxy counters: %s", resp.Status)
	}
	return out, json.NewDecoder(resp.Body).Decode(&out)
}
