// Package scenario parses and validates strandlab scenario files: the
// declarative description of one experiment (cluster, workload, churn,
// seed). Parsing is strict: unknown fields and out-of-range values are
// rejected with the field's path, before any cluster starts.
package scenario

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/strandlab/strandlab/internal/fault"
	"github.com/strandlab/strandlab/internal/safefile"
	"github.com/strandlab/strandlab/manifests"
)

// Scenario is one experiment.
type Scenario struct {
	// Name appears in reports; defaults to the file name.
	Name     string   `json:"name"`
	Seed     int64    `json:"seed"`
	Cluster  Cluster  `json:"cluster"`
	Workload Workload `json:"workload"`
	Churn    Churn    `json:"churn"`
	// Scheduling configures the pinning scheduler extender.
	Scheduling Scheduling `json:"scheduling,omitempty"`
	// Proxy, when present, puts the throttling proxy between
	// kube-controller-manager and kube-apiserver with this fault profile
	// (an empty section: the proxy without faults).
	Proxy *Proxy `json:"proxy,omitempty"`
	// CSIErrors make strandlab's CSI driver fail or slow the matching CSI
	// calls (docs/scenarios.md, csiErrors); their draws are seeded with
	// the scenario's seed.
	CSIErrors []fault.CSIError `json:"csiErrors,omitempty"`
	// Builds are the controller builds to compare; default [stock].
	Builds []string `json:"builds,omitempty"`
	// Expect is the outcome band per build (key: build name, or "*" for
	// builds not named) that CI holds a run to (`strandlab run --check`)
	// and a pool of runs (`strandlab merge --check`, Band.Pooled); it
	// never changes what is measured.
	Expect map[string]Band `json:"expect,omitempty"`
	// UntilVerdict, when present, is how `strandlab run` runs this
	// scenario when its command line says neither --until-verdict nor
	// --cycles: in rounds until a verdict, as --until-verdict does, with
	// these values for the flags not given. It is what makes make e2e's
	// main job end with a verdict on the seed. A run of other builds than
	// stock and at least one more is a fixed run, since it has nothing to
	// test against stock.
	UntilVerdict *UntilVerdict `json:"untilVerdict,omitempty"`
}

// UntilVerdict is a scenario's sequential design (Scenario.UntilVerdict).
// A field left out is the flag's default.
type UntilVerdict struct {
	// Alpha is --verdict-alpha: the chance of each kind of wrong verdict,
	// however many rounds are looked at.
	Alpha float64 `json:"alpha,omitempty"`
	// Margin is --verdict-margin: the difference of stranding-episode
	// rates (per cycle) that "no difference" rules out.
	Margin float64 `json:"margin,omitempty"`
}

// Band is the expected outcome of one build. Unset bounds are not checked.
type Band struct {
	Stranded         Range `json:"stranded,omitempty"`
	SafetyViolations Range `json:"safetyViolations,omitempty"`
	// CyclesNotRunning: cycles that ended neither Running nor stranded.
	CyclesNotRunning Range `json:"cyclesNotRunning,omitempty"`
	// StrandedRate bounds stranded cycles per cycle run (the report's
	// stranded_rate). A count band cannot say "the reproduction still
	// works" for runs of any length; a rate band can, and it is what the
	// nightly holds stock's pooled shards to (`strandlab merge --check`,
	// docs/ci.md).
	StrandedRate RateRange `json:"strandedRate,omitzero"`
	// FirstCycle: "stranded" or "running" — how cycle 0 must end.
	FirstCycle string `json:"firstCycle,omitempty"`
}

// Range is an inclusive [min, max] on a count; nil bounds are open.
type Range struct {
	Min *int `json:"min,omitempty"`
	Max *int `json:"max,omitempty"`
}

// RateRange is an inclusive [min, max] on a proportion in [0, 1]; nil
// bounds are open.
type RateRange struct {
	Min *float64 `json:"min,omitempty"`
	Max *float64 `json:"max,omitempty"`
}

// Cluster is the topology.
type Cluster struct {
	// Provider: local (default), kind or existing.
	Provider string `json:"provider,omitempty"`
	// Nodes: the local and kind providers start this many worker nodes;
	// the existing provider needs at least this many schedulable ones.
	Nodes int `json:"nodes"`
	// StorageClass of the workload's PVCs (default strandlab-hostpath,
	// the class of strandlab's CSI driver, the only one the local and kind
	// providers have). The existing provider uses the cluster's class of
	// this name (docs/existing.md).
	StorageClass string `json:"storageClass,omitempty"`
	// CSIDriver is the CSI driver's name (default hostpath.csi.k8s.io).
	CSIDriver string `json:"csiDriver,omitempty"`
	// NodeStatusUpdateFrequency of the (simulated) kubelets; default 10s as
	// the kubelet's. Volumes a pod needs reach node.status.volumesInUse at
	// this pace, which gates both attach verification and detach.
	NodeStatusUpdateFrequency Duration `json:"nodeStatusUpdateFrequency,omitempty"`
	// NodeStatusReportFrequency: the kubelets write their status even when
	// nothing changed after this long (default 5m as the kubelet's). A short
	// one gives the controller a steady stream of node events.
	NodeStatusReportFrequency Duration `json:"nodeStatusReportFrequency,omitempty"`
	// FailedMountOnTimeout: the simulated kubelets record FailedMount when a
	// pod's volumes are not mounted within 2m3s, as kubelets up to v1.27
	// did; v1.28 and later record nothing for a stranded volume. Local
	// provider only: real kubelets behave as their version does.
	FailedMountOnTimeout bool `json:"failedMountOnTimeout,omitempty"`
}

// Workload is what runs on the cluster.
type Workload struct {
	StatefulSets []StatefulSet `json:"statefulSets"`
	// HostNetwork runs the workload's pods in their node's network
	// namespace. Nothing in the experiment talks to a pod, and with real
	// kubelets every pod's start and stop otherwise creates and destroys a
	// network namespace and runs the CNI plugins: the throughput-bound kind
	// profiles turn it on (docs/performance.md, "kind"). kubelet-sim has no
	// pod network, so it changes nothing on local.
	HostNetwork bool `json:"hostNetwork,omitempty"`
}

// StatefulSet is one StatefulSet of the workload.
type StatefulSet struct {
	Name     string `json:"name"`
	Replicas int32  `json:"replicas"`
	// VolumesPerPod is the number of CSI volumes (PVCs) per pod.
	VolumesPerPod int `json:"volumesPerPod,omitempty"`
	// Service: create the headless Service (default true). Soaks turn it
	// off: endpoints churn costs CPU and has nothing to do with attach.
	Service *bool `json:"service,omitempty"`
}

// Scheduling is how StatefulSet pods are placed.
type Scheduling struct {
	// Pinning: none (default: kube-scheduler alone), sticky (each ordinal
	// stays on the node of its first placement) or static (Static pins,
	// unlisted ordinals sticky).
	Pinning string      `json:"pinning,omitempty"`
	Static  []StaticPin `json:"static,omitempty"`
	// ExtenderLatency delays every filter call: one of fixed,
	// uniformMin+uniformMax, exponentialMean. Draws are seeded from seed.
	ExtenderLatency fault.Delay `json:"extenderLatency,omitzero"`
}

// StaticPin pins one ordinal of a StatefulSet to a node.
type StaticPin struct {
	StatefulSet string `json:"statefulSet"`
	Ordinal     int    `json:"ordinal"`
	Node        string `json:"node"`
}

// Proxy is the throttling proxy's fault profile (its seed is the
// scenario's).
type Proxy struct {
	Rules          []fault.Rule `json:"rules,omitempty"`
	RequestLatency fault.Delay  `json:"requestLatency,omitzero"`
	QPS            float64      `json:"qps,omitempty"`
	Burst          int          `json:"burst,omitempty"`
	QueueLimit     int          `json:"queueLimit,omitempty"`
	// APIErrors answer matching controller requests with an error status
	// instead of forwarding them (docs/scenarios.md, apiErrors).
	APIErrors []fault.APIError `json:"apiErrors,omitempty"`
}

// Churn is how pods are deleted and recreated.
type Churn struct {
	// Cycles is the number of delete/recreate cycles.
	Cycles int `json:"cycles"`
	// Order of the pods deleted, in rounds that delete every pod once:
	// random (default: each round shuffled with the seed) or roundRobin.
	Order string `json:"order,omitempty"`
	// StrandingThreshold: how long a volume must stay stranded (attached,
	// absent from node status) before it counts (default 30s).
	StrandingThreshold Duration `json:"strandingThreshold,omitempty"`
	// CycleTimeout bounds one cycle: a replacement not Running by then fails
	// the cycle. Default 2m.
	CycleTimeout Duration `json:"cycleTimeout,omitempty"`
	// Concurrency: cycles in flight at once, each on its own pod (default 1).
	Concurrency int `json:"concurrency,omitempty"`
	// Interval paces the churn: the least time between two deletions
	// (default 0: as fast as the concurrency allows).
	Interval Duration `json:"interval,omitempty"`
	// StatefulSets whose pods are deleted (default: all of the workload's).
	StatefulSets []string `json:"statefulSets,omitempty"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration = fault.Duration

var (
	dnsLabel      = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,40}[a-z0-9])?$`)
	csiDriverName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$`)
	// scenarioName: report directories, kind clusters and Docker
	// containers are named after it, so it may not leave a directory
	// ("../x", "a/b"), split a line or break a cluster name.
	scenarioName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$`)
	// dnsSubdomain: a Kubernetes object name such as a StorageClass's.
	dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
)

// StorageClassName is the StorageClass of the workload's PVCs:
// cluster.storageClass, default strandlab-hostpath.
func (c Cluster) StorageClassName() string {
	if c.StorageClass == "" {
		return manifests.StorageClassName
	}
	return c.StorageClass
}

// Load reads and validates a scenario file, naming it after the file when it
// has no name (DefaultName).
func Load(path string) (*Scenario, error) {
	data, err := safefile.ReadRegular(path, MaxFileSize, "a scenario's")
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", path, err)
	}
	if s.Name == "" {
		s.Name = DefaultName(path)
		if err := ValidName(s.Name); err != nil {
			return nil, fmt.Errorf("scenario %s has no name and its file name will not do: %w (set name: in the file)", path, err)
		}
	}
	return s, nil
}

// ValidName is the one rule for scenario names, shared by validate, run and
// merge: lower-case letters, digits, '-' and '.', starting and ending with a
// letter or digit, at most 63 characters.
func ValidName(name string) error {
	if !scenarioName.MatchString(name) {
		return fmt.Errorf("name: %q is not a valid scenario name (lower-case letters, digits, '-' and '.', starting and ending with a letter or digit, at most 63 characters)", name)
	}
	return nil
}

// MaxFileSize bounds a scenario file: the largest shipped one is about
// 3 KiB; a bound keeps `validate /dev/zero` from reading forever.
const MaxFileSize = 1 << 20

// Parse decodes and validates a scenario.
func Parse(data []byte) (*Scenario, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, errors.New("empty scenario")
	}
	if n, err := documents(data); err != nil {
		return nil, err
	} else if n > 1 {
		// The decoder would read the first and drop the rest silently.
		return nil, fmt.Errorf("%d YAML documents: a scenario file holds one (split it at its '---' lines)", n)
	}
	var doc any
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	if err := checkUnknownFields(doc, reflect.TypeFor[Scenario](), ""); err != nil {
		return nil, atLine(data, err)
	}
	var s Scenario
	if err := yaml.UnmarshalStrict(data, &s); err != nil {
		return nil, err
	}
	s.setDefaults()
	if err := s.Validate(); err != nil {
		return nil, atLine(data, err)
	}
	return &s, nil
}

func (s *Scenario) setDefaults() {
	if s.Cluster.Provider == "" {
		s.Cluster.Provider = "local"
	}
	if s.Churn.CycleTimeout.Duration == 0 {
		s.Churn.CycleTimeout.Duration = defaultCycleTimeout
	}
	if len(s.Builds) == 0 {
		s.Builds = []string{"stock"}
	}
	if s.Churn.StrandingThreshold.Duration == 0 {
		s.Churn.StrandingThreshold.Duration = 30 * time.Second
	}
}

// documents counts the non-empty YAML documents in data.
func documents(data []byte) (int, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	n := 0
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			n++
		}
	}
}

// stripComments drops whole-line comments, so a document of comments alone
// (a header above the first '---') does not count.
func stripComments(doc []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' && !bytes.Equal(t, []byte("---")) {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

// Validate reports the first invalid field, by its path.
func (s *Scenario) Validate() error {
	if s.Name != "" {
		if err := ValidName(s.Name); err != nil {
			return err
		}
	}
	// Which providers exist, and what each can do, is the registry's
	// (cluster.Capabilities.CheckScenario); a name is all a file can be
	// checked for alone.
	if !dnsLabel.MatchString(s.Cluster.Provider) {
		return fmt.Errorf("cluster.provider: %q is not a provider name (lower-case letters, digits, '-')", s.Cluster.Provider)
	}
	if s.Cluster.Nodes < 1 || s.Cluster.Nodes > 100 {
		return fmt.Errorf("cluster.nodes: %d out of range [1, 100]", s.Cluster.Nodes)
	}
	if d := s.Cluster.CSIDriver; d != "" && !csiDriverName.MatchString(d) {
		return fmt.Errorf("cluster.csiDriver: %q is not a valid CSI driver name (DNS subdomain, at most 63 characters)", d)
	}
	if d := s.Cluster.NodeStatusUpdateFrequency.Duration; d != 0 && (d < 100*time.Millisecond || d > 5*time.Minute) {
		return fmt.Errorf("cluster.nodeStatusUpdateFrequency: %v out of range [100ms, 5m]", d)
	}
	if d := s.Cluster.NodeStatusReportFrequency.Duration; d != 0 && (d < 100*time.Millisecond || d > time.Hour) {
		return fmt.Errorf("cluster.nodeStatusReportFrequency: %v out of range [100ms, 1h]", d)
	}
	if c := s.Cluster.StorageClass; c != "" {
		if !dnsSubdomain.MatchString(c) {
			return fmt.Errorf("cluster.storageClass: %q is not a valid StorageClass name (DNS subdomain: lower-case letters, digits, '-', '.', at most 253 characters)", c)
		}
	}
	if len(s.Workload.StatefulSets) == 0 {
		return errors.New("workload.statefulSets: at least one StatefulSet is required")
	}
	seen := map[string]bool{}
	for i, sts := range s.Workload.StatefulSets {
		path := fmt.Sprintf("workload.statefulSets[%d]", i)
		if !dnsLabel.MatchString(sts.Name) {
			return fmt.Errorf("%s.name: %q is not a DNS label of at most 42 characters", path, sts.Name)
		}
		if seen[sts.Name] {
			return fmt.Errorf("%s.name: %q is used twice", path, sts.Name)
		}
		seen[sts.Name] = true
		if sts.Replicas < 1 || sts.Replicas > 1000 {
			return fmt.Errorf("%s.replicas: %d out of range [1, 1000]", path, sts.Replicas)
		}
		if sts.VolumesPerPod < 0 || sts.VolumesPerPod > 16 {
			return fmt.Errorf("%s.volumesPerPod: %d out of range [0, 16]", path, sts.VolumesPerPod)
		}
	}
	if s.Churn.Cycles < 0 || s.Churn.Cycles > 1_000_000 {
		return fmt.Errorf("churn.cycles: %d out of range [0, 1000000]", s.Churn.Cycles)
	}
	if d := s.Churn.StrandingThreshold.Duration; d < time.Second || d >= s.Churn.CycleTimeout.Duration {
		return fmt.Errorf("churn.strandingThreshold: %v must be at least 1s and below churn.cycleTimeout (%v)", d, s.Churn.CycleTimeout.Duration)
	}
	if o := s.Churn.Order; o != "" && o != "random" && o != "roundRobin" {
		return fmt.Errorf("churn.order: %q is not random or roundRobin", o)
	}
	if d := s.Churn.CycleTimeout.Duration; d < minCycleTimeout || d > maxCycleTimeout {
		return fmt.Errorf("churn.cycleTimeout: %v out of range [%v, %v]", d, minCycleTimeout, maxCycleTimeout)
	}
	if c := s.Churn.Concurrency; c < 0 || c > 500 {
		return fmt.Errorf("churn.concurrency: %d out of range [0, 500]", c)
	}
	if d := s.Churn.Interval.Duration; d < 0 || d > time.Hour {
		return fmt.Errorf("churn.interval: %v out of range [0, 1h]", d)
	}
	for i, name := range s.Churn.StatefulSets {
		if !seen[name] {
			return fmt.Errorf("churn.statefulSets[%d]: %q is not a StatefulSet of workload.statefulSets", i, name)
		}
	}
	if c, pods := s.Churn.Concurrency, s.churnedPods(); c > pods {
		return fmt.Errorf("churn.concurrency: %d is more than the %d pods churned: at most %d cycles can be in flight", c, pods, pods)
	}
	if err := s.validateScheduling(seen); err != nil {
		return err
	}
	if s.Proxy != nil {
		profile := s.Proxy.Profile(s.Seed)
		if err := profile.Validate(); err != nil {
			return fmt.Errorf("proxy.%w", err)
		}
	}
	if err := fault.ValidateCSIErrors(s.CSIErrors); err != nil {
		return err
	}
	pvcs := s.PVCNames()
	for i, e := range s.CSIErrors {
		for j, p := range e.PVCs {
			if !slices.Contains(pvcs, p) {
				// A claim the workload does not have matches nothing: the
				// faulted scenario would silently be its own control.
				return fmt.Errorf("csiErrors[%d].pvcs[%d]: %q is not a claim of the workload (%s)", i, j, p, pvcExamples(pvcs))
			}
		}
	}
	for i, b := range s.Builds {
		if !dnsLabel.MatchString(b) {
			return fmt.Errorf("builds[%d]: %q is not a valid build name", i, b)
		}
	}
	for _, name := range sortedBandKeys(s.Expect) {
		if err := s.Expect[name].validate("expect." + name); err != nil {
			return err
		}
	}
	if u := s.UntilVerdict; u != nil {
		// 0 is "left out"; what is given must be a probability (alpha) or
		// a rate per cycle (margin), as the flags must.
		if !(u.Alpha >= 0 && u.Alpha < 1) {
			return fmt.Errorf("untilVerdict.alpha: %v is not in (0, 1)", u.Alpha)
		}
		if !(u.Margin >= 0 && u.Margin < 1) {
			return fmt.Errorf("untilVerdict.margin: %v is not a rate in (0, 1) (stranding episodes per cycle: 0.005 is 5 per 1,000)", u.Margin)
		}
	}
	return nil
}

func (b Band) validate(path string) error {
	for field, r := range map[string]Range{"stranded": b.Stranded, "safetyViolations": b.SafetyViolations, "cyclesNotRunning": b.CyclesNotRunning} {
		if r.Min != nil && *r.Min < 0 {
			return fmt.Errorf("%s.%s.min: %d is negative", path, field, *r.Min)
		}
		if r.Min != nil && r.Max != nil && *r.Max < *r.Min {
			return fmt.Errorf("%s.%s.max: %d is below min %d", path, field, *r.Max, *r.Min)
		}
	}
	r := b.StrandedRate
	for _, bound := range []struct {
		name string
		v    *float64
	}{{"min", r.Min}, {"max", r.Max}} {
		// Written so that NaN fails too.
		if bound.v != nil && !(*bound.v >= 0 && *bound.v <= 1) {
			return fmt.Errorf("%s.strandedRate.%s: %v out of range [0, 1]", path, bound.name, *bound.v)
		}
	}
	if r.Min != nil && r.Max != nil && *r.Max < *r.Min {
		return fmt.Errorf("%s.strandedRate.max: %v is below min %v", path, *r.Max, *r.Min)
	}
	if f := b.FirstCycle; f != "" && f != "stranded" && f != "running" {
		return fmt.Errorf("%s.firstCycle: %q is not stranded or running", path, f)
	}
	return nil
}

// replicas is the replica count of StatefulSet name (0 if there is none).
func (s *Scenario) replicas(name string) int {
	for _, sts := range s.Workload.StatefulSets {
		if sts.Name == name {
			return int(sts.Replicas)
		}
	}
	return 0
}

// churnedPods is how many pods the churn deletes among: those of
// churn.statefulSets, or of every StatefulSet.
func (s *Scenario) churnedPods() int {
	n := 0
	for _, sts := range s.Workload.StatefulSets {
		if len(s.Churn.StatefulSets) == 0 || slices.Contains(s.Churn.StatefulSets, sts.Name) {
			n += int(sts.Replicas)
		}
	}
	return n
}

// CheckExpectKeys refuses an expect key that names no build: a typo
// (`fixx:`) would leave the real build without its band and let --check
// pass. known are the controller builds that exist (stock and the
// repository's builds); the scenario's own builds count too, and '*' is
// every build.
func (s *Scenario) CheckExpectKeys(known []string) error {
	for _, k := range sortedBandKeys(s.Expect) {
		if k == "*" || slices.Contains(s.Builds, k) || slices.Contains(known, k) {
			continue
		}
		names := append(slices.Clone(s.Builds), known...)
		slices.Sort(names)
		names = slices.Compact(names)
		return fmt.Errorf("expect.%s: no controller build is called %q (builds: %s, or '*' for all)", k, k, strings.Join(names, ", "))
	}
	return nil
}

// Pooled is the band as it applies to a report pooled from several runs
// (`strandlab merge --scenario`): every bound but firstCycle, which is
// about one run's cycle 0 and has no meaning for a pool of runs (each run
// has its own; `strandlab run --check` checks it). dropped names what was
// left out, for the user to be told.
func (b Band) Pooled() (pooled Band, dropped []string) {
	if b.FirstCycle != "" {
		dropped = append(dropped, "firstCycle")
		b.FirstCycle = ""
	}
	return b, dropped
}

// BandFor is the expected band of build (its own, else "*"), if any.
func (s *Scenario) BandFor(build string) (Band, bool) {
	if b, ok := s.Expect[build]; ok {
		return b, true
	}
	b, ok := s.Expect["*"]
	return b, ok
}

func sortedBandKeys(m map[string]Band) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (s *Scenario) validateScheduling(statefulSets map[string]bool) error {
	sch := s.Scheduling
	switch sch.Pinning {
	case "", "none", "sticky", "static":
	default:
		return fmt.Errorf("scheduling.pinning: %q is not one of none, sticky, static", sch.Pinning)
	}
	if len(sch.Static) > 0 && sch.Pinning != "static" {
		return fmt.Errorf("scheduling.static: given, but scheduling.pinning is %q, not static", sch.Pinning)
	}
	for i, p := range sch.Static {
		path := fmt.Sprintf("scheduling.static[%d]", i)
		if !statefulSets[p.StatefulSet] {
			return fmt.Errorf("%s.statefulSet: %q is not a StatefulSet of workload.statefulSets", path, p.StatefulSet)
		}
		if p.Ordinal < 0 {
			return fmt.Errorf("%s.ordinal: %d is negative", path, p.Ordinal)
		}
		if r := s.replicas(p.StatefulSet); p.Ordinal >= r {
			return fmt.Errorf("%s.ordinal: %d, but StatefulSet %s has %d replicas (ordinals 0-%d): the pin would pin nothing", path, p.Ordinal, p.StatefulSet, r, r-1)
		}
		if p.Node == "" {
			return fmt.Errorf("%s.node: must not be empty", path)
		}
		// A provider that names its nodes up front checks the pins
		// against them (cluster.Capabilities.CheckScenario); the others
		// once the cluster is up.
	}
	if err := sch.ExtenderLatency.Validate(); err != nil {
		return fmt.Errorf("scheduling.extenderLatency.%w", err)
	}
	if !sch.ExtenderLatency.IsZero() && (sch.Pinning == "" || sch.Pinning == "none") {
		return fmt.Errorf("scheduling.extenderLatency: needs the extender (scheduling.pinning sticky or static)")
	}
	return nil
}

// PVCNames are the names of the workload's PersistentVolumeClaims: the
// StatefulSet controller names a pod's claim <template>-<set>-<ordinal>
// (pkg/controller/statefulset getPersistentVolumeClaimName), and the
// workload's templates are data-0, data-1, ... (internal/workload).
func (s *Scenario) PVCNames() []string {
	var out []string
	for _, sts := range s.Workload.StatefulSets {
		for o := range sts.Replicas {
			for v := range sts.VolumesPerPod {
				out = append(out, fmt.Sprintf("data-%d-%s-%d", v, sts.Name, o))
			}
		}
	}
	return out
}

// pvcExamples names the first and last claim, or says there is none.
func pvcExamples(pvcs []string) string {
	switch len(pvcs) {
	case 0:
		return "it has none"
	case 1:
		return "its only claim is " + pvcs[0]
	}
	return fmt.Sprintf("%d claims, %s to %s", len(pvcs), pvcs[0], pvcs[len(pvcs)-1])
}

// Profile is the proxy's profile for this scenario, seeded with seed.
func (p *Proxy) Profile(seed int64) fault.Profile {
	return fault.Profile{Rules: p.Rules, RequestLatency: p.RequestLatency, QPS: p.QPS, Burst: p.Burst, QueueLimit: p.QueueLimit, APIErrors: p.APIErrors, Seed: uint64(seed)}
}

// Outcome is what a build measured, as a band checks it.
type Outcome struct {
	// Cycles run: the denominator of the stranded rate.
	Cycles                                       int
	Stranded, SafetyViolations, CyclesNotRunning int
	// FirstCycle: how cycle 0 ended ("stranded", "running", ...; "" if none).
	FirstCycle string
}

// Check returns the band's unmet bounds, one line each (none: met).
func (b Band) Check(o Outcome) []string {
	var unmet []string
	for _, c := range []struct {
		name string
		r    Range
		got  int
	}{{"stranded", b.Stranded, o.Stranded}, {"safetyViolations", b.SafetyViolations, o.SafetyViolations}, {"cyclesNotRunning", b.CyclesNotRunning, o.CyclesNotRunning}} {
		if c.r.Min != nil && c.got < *c.r.Min {
			unmet = append(unmet, fmt.Sprintf("%s = %d, expected at least %d", c.name, c.got, *c.r.Min))
		}
		if c.r.Max != nil && c.got > *c.r.Max {
			unmet = append(unmet, fmt.Sprintf("%s = %d, expected at most %d", c.name, c.got, *c.r.Max))
		}
	}
	unmet = append(unmet, b.StrandedRate.check(o)...)
	if b.FirstCycle != "" && o.FirstCycle != b.FirstCycle {
		unmet = append(unmet, fmt.Sprintf("firstCycle = %q, expected %q", o.FirstCycle, b.FirstCycle))
	}
	return unmet
}

// check holds the stranded rate of o to r. A build that ran no cycle has no
// rate, which meets no bound: a run that measured nothing must not pass a
// check that it still reproduces (or never strands).
func (r RateRange) check(o Outcome) []string {
	if r.Min == nil && r.Max == nil {
		return nil
	}
	if o.Cycles <= 0 {
		return []string{"strandedRate: no cycles run, no rate to check"}
	}
	rate := float64(o.Stranded) / float64(o.Cycles)
	var unmet []string
	if r.Min != nil && rate < *r.Min {
		unmet = append(unmet, fmt.Sprintf("strandedRate = %.6g (%d/%d), expected at least %v", rate, o.Stranded, o.Cycles, *r.Min))
	}
	if r.Max != nil && rate > *r.Max {
		unmet = append(unmet, fmt.Sprintf("strandedRate = %.6g (%d/%d), expected at most %v", rate, o.Stranded, o.Cycles, *r.Max))
	}
	return unmet
}

// DefaultName is the name Load gives a scenario whose file has no name: the
// file's base name without its extension. Reports carry it (report.json's
// "scenario"), so a run and `strandlab merge --scenario` name it alike.
func DefaultName(path string) string {
	return strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
}
