package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/strandlab/strandlab/internal/process"
)

// startExtender starts the pinning extender and writes the scheduler
// configuration that calls it. It returns the readiness check of the
// extender and the kube-scheduler flags that replace the defaults.
func (st *starting) startExtender() (readiness, []string, error) {
	c, ext, cfg, logDir, port := st.c, st.spec.Pinning, st.cfg, st.c.logDir, st.ports.extender
	configFile := filepath.Join(c.dir, "pinning.json")
	data, err := json.Marshal(ext)
	if err != nil {
		return readiness{}, nil, err
	}
	if err := os.WriteFile(configFile, data, 0o644); err != nil {
		return readiness{}, nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	proc, err := c.procs.Start(process.Spec{Name: "pin-extender", Path: st.bins.PinExtender, LogFile: filepath.Join(logDir, "pin-extender.log"),
		Args: []string{"--bind=" + addr, "--kubeconfig=" + cfg.pinExtender, "--config=" + configFile}})
	if err != nil {
		return readiness{}, nil, err
	}
	schedConfig := filepath.Join(c.dir, "kube-scheduler.yaml")
	conf := ext.SchedulerConfiguration(cfg.scheduler, addr)
	if err := os.WriteFile(schedConfig, []byte(conf), 0o644); err != nil {
		return readiness{}, nil, err
	}
	return readiness{proc: proc, check: httpGetOK("http://"+addr+"/healthz", nil)}, []string{"--config=" + schedConfig}, nil
}
