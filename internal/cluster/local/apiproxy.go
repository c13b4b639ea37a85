package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/strandlab/strandlab/internal/pki"
	"github.com/strandlab/strandlab/internal/process"

	"github.com/strandlab/strandlab/internal/fault"
)

// startProxy starts the throttling proxy in front of the API server and
// writes the kubeconfig kube-controller-manager uses to reach it: the same
// client certificate, another server.
func (p *Provider) startProxy(c *Cluster, profile *fault.Profile, cfg *clusterPKI, upstream, logDir string, port, adminPort int) (readiness, string, error) {
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
func (c *Cluster) ProxyCounters(ctx context.Context) (fault.Counters, error) {
	var out fault.Counters
	return out, c.proxyGet(ctx, "/strandlab/counters", &out)
}

// ProxyJournal reads the proxy's journal since t.
func (c *Cluster) ProxyJournal(ctx context.Context, since time.Time) ([]fault.JournalEntry, error) {
	var out []fault.JournalEntry
	return out, c.proxyGet(ctx, "/strandlab/journal?since="+url.QueryEscape(since.Format(time.RFC3339Nano)), &out)
}

func (c *Cluster) proxyGet(ctx context.Context, path string, into any) error {
	if c.proxyAdmin == "" {
		return errors.New("this cluster runs without the proxy")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.proxyAdmin+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("proxy %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
