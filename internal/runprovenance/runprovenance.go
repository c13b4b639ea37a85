// Package runprovenance reads what a run's report records about where it
// ran (provenance.Run): the harness's own build, the scenario file's hash
// and the machine. It does I/O (the build info, /etc/machine-id,
// /proc/meminfo and /proc/cpuinfo); the types are provenance's.
package runprovenance

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/strandlab/strandlab/internal/provenance"
)

// Of is the provenance of a run of the scenario file at scenarioPath by
// this binary on this machine.
func Of(scenarioPath string) (provenance.Run, error) {
	data, err := os.ReadFile(scenarioPath)
	if err != nil {
		return provenance.Run{}, err
	}
	sum := sha256.Sum256(data)
	return provenance.Run{Harness: Harness(), ScenarioSHA256: hex.EncodeToString(sum[:]), Machine: ThisMachine()}, nil
}

// Harness is this binary's VCS revision from its build info, "+modified"
// appended for a build from a changed tree; "unknown" without one.
func Harness() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, modified := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if modified {
		rev += "+modified"
	}
	return rev
}

// ThisMachine describes the machine without naming it.
func ThisMachine() provenance.Machine {
	m := provenance.Machine{CPUs: runtime.NumCPU()}
	id, err := os.ReadFile("/etc/machine-id")
	if err != nil || strings.TrimSpace(string(id)) == "" {
		host, _ := os.Hostname()
		id = []byte(host)
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(string(id))))
	m.ID = hex.EncodeToString(sum[:])[:12]
	if kib, ok := procField("/proc/meminfo", "MemTotal"); ok {
		if n, err := strconv.ParseFloat(strings.TrimSuffix(kib, " kB"), 64); err == nil {
			m.MemoryGiB = float64(int(n/(1<<20)*10+0.5)) / 10
		}
	}
	m.CPUModel, _ = procField("/proc/cpuinfo", "model name")
	return m
}

// procField is the value of the first "key: value" line of a /proc file
// with the key.
func procField(path, key string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}
