package local

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/pki"
	"github.com/strandlab/strandlab/internal/process"
	"github.com/strandlab/strandlab/internal/proxyadmin"
)

// startProxy starts the throttling proxy in front of the API server, when
// the spec has a fault profile, and writes the kubeconfig
// kube-controller-manager uses to reach it: the same client certificate,
// another server.
func (st *starting) startProxy(context.Context) ([]readiness, error) {
	if st.spec.Proxy == nil {
		return nil, nil
	}
	c, cfg, port := st.c, st.cfg, st.ports.proxy
	profileFile := filepath.Join(c.dir, "proxy-profile.json")
	data, err := json.Marshal(st.spec.Proxy)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(profileFile, data, 0o644); err != nil {
		return nil, err
	}
	c.proxyAdmin = fmt.Sprintf("http://127.0.0.1:%d", st.ports.proxyAdmin)
	proc, err := c.procs.Start(process.Spec{Name: "apiproxy", Path: st.bins.APIProxy, LogFile: filepath.Join(c.logDir, "apiproxy.log"), Args: []string{
		fmt.Sprintf("--bind=127.0.0.1:%d", port),
		fmt.Sprintf("--admin-bind=127.0.0.1:%d", st.ports.proxyAdmin),
		"--tls-cert=" + cfg.proxyCert, "--tls-key=" + cfg.proxyKey, "--client-ca=" + cfg.caFile,
		fmt.Sprintf("--upstream=https://127.0.0.1:%d", st.ports.apiServer), "--upstream-ca=" + cfg.caFile,
		"--identity-cert=" + cfg.kcmCert, "--identity-key=" + cfg.kcmKey,
		"--profile=" + profileFile,
	}, Env: steadySysmonEnv()})
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(c.dir, "pki", "kube-controller-manager-via-proxy.kubeconfig")
	if err := pki.WriteKubeconfig(kubeconfig, "kube-controller-manager", fmt.Sprintf("https://127.0.0.1:%d", port), cfg.caFile, cfg.kcmCert, cfg.kcmKey); err != nil {
		return nil, err
	}
	// kube-controller-manager (next phase) connects here, once it is ready.
	st.kcmKubeconfig = kubeconfig
	return []readiness{{proc: proc, check: httpGetOK(c.proxyAdmin+"/healthz", nil)}}, nil
}

// ProxyCounters reads the proxy's counters.
func (c *Cluster) ProxyCounters(ctx context.Context) (fault.Counters, error) {
	return proxyadmin.Client{Base: c.proxyAdmin}.Counters(ctx)
}

// ProxyJournal reads the proxy's journal since t.
func (c *Cluster) ProxyJournal(ctx context.Context, since time.Time) ([]fault.JournalEntry, error) {
	return proxyadmin.Client{Base: c.proxyAdmin}.Journal(ctx, since)
}
