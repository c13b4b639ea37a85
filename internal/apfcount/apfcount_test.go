package apfcount

import (
	"maps"
	"slices"
	"strings"
	"testing"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/strandlab/strandlab/internal/usage"
)

// Builders of the fixtures below.
func users(names ...string) []flowcontrolv1.Subject {
	var out []flowcontrolv1.Subject
	for _, n := range names {
		out = append(out, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: n}})
	}
	return out
}

func groups(names ...string) []flowcontrolv1.Subject {
	var out []flowcontrolv1.Subject
	for _, n := range names {
		out = append(out, flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: n}})
	}
	return out
}

func serviceAccount(ns, name string) flowcontrolv1.Subject {
	return flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindServiceAccount, ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: ns, Name: name}}
}

func resources(verbs, apiGroups, res []string, clusterScope bool) flowcontrolv1.ResourcePolicyRule {
	return flowcontrolv1.ResourcePolicyRule{Verbs: verbs, APIGroups: apiGroups, Resources: res, ClusterScope: clusterScope, Namespaces: []string{"*"}}
}

var (
	all                 = []string{"*"}
	everyResourceReq    = resources(all, all, all, true)
	everyNonResourceReq = flowcontrolv1.NonResourcePolicyRule{Verbs: all, NonResourceURLs: all}
)

func schema(name, pl string, precedence int32, dm flowcontrolv1.FlowDistinguisherMethodType, rules ...flowcontrolv1.PolicyRulesWithSubjects) flowcontrolv1.FlowSchema {
	fs := flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: pl}, MatchingPrecedence: precedence, Rules: rules}}
	if dm != "" {
		fs.Spec.DistinguisherMethod = &flowcontrolv1.FlowDistinguisherMethod{Type: dm}
	}
	return fs
}

func everything(subjects []flowcontrolv1.Subject) flowcontrolv1.PolicyRulesWithSubjects {
	return flowcontrolv1.PolicyRulesWithSubjects{Subjects: subjects, ResourceRules: []flowcontrolv1.ResourcePolicyRule{everyResourceReq},
		NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{everyNonResourceReq}}
}

const byUser, byNamespace = flowcontrolv1.FlowDistinguisherMethodByUserType, flowcontrolv1.FlowDistinguisherMethodByNamespaceType

// defaults are the FlowSchemas a v1.37 API server creates, as data (their
// definitions: k8s.io/apiserver/pkg/apis/flowcontrol/bootstrap), listed
// out of order on purpose: Plan orders them itself.
func defaults() []flowcontrolv1.FlowSchema {
	kubeSystemSAs := serviceAccount("kube-system", "*")
	return []flowcontrolv1.FlowSchema{
		schema("global-default", "global-default", 9900, byUser, everything(groups("system:unauthenticated", "system:authenticated"))),
		schema("exempt", "exempt", 1, "", everything(groups("system:masters"))),
		schema("probes", "exempt", 2, "", flowcontrolv1.PolicyRulesWithSubjects{Subjects: groups("system:unauthenticated", "system:authenticated"),
			NonResourceRules: []flowcontrolv1.NonResourcePolicyRule{{Verbs: []string{"get"}, NonResourceURLs: []string{"/healthz", "/readyz", "/livez"}}}}),
		schema("system-leader-election", "leader-election", 100, byUser, flowcontrolv1.PolicyRulesWithSubjects{
			Subjects:      append(users("system:kube-controller-manager", "system:kube-scheduler"), kubeSystemSAs),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{resources([]string{"get", "create", "update"}, []string{"coordination.k8s.io"}, []string{"leases"}, false)}}),
		schema("system-node-high", "node-high", 400, byUser, flowcontrolv1.PolicyRulesWithSubjects{Subjects: groups("system:nodes"),
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{resources(all, []string{""}, []string{"nodes", "nodes/status"}, true),
				resources(all, []string{"coordination.k8s.io"}, []string{"leases"}, false)}}),
		schema("system-nodes", "system", 500, byUser, everything(groups("system:nodes"))),
		schema("kube-scheduler", "workload-high", 800, byNamespace, everything(users("system:kube-scheduler"))),
		schema("kube-controller-manager", "workload-high", 800, byNamespace, everything(users("system:kube-controller-manager"))),
		schema("kube-system-service-accounts", "workload-high", 900, byNamespace, everything([]flowcontrolv1.Subject{kubeSystemSAs})),
		schema("service-accounts", "workload-low", 9000, byUser, everything(groups("system:serviceaccounts"))),
		schema("catch-all", "catch-all", 10000, byUser, everything(groups("system:unauthenticated", "system:authenticated"))),
	}
}

// identities are the local provider's (internal/cluster/local).
func identities() []Identity {
	return []Identity{
		User("harness", "harness", "strandlab-admin", "system:masters"),
		User("kube-apiserver", "kube-apiserver", "system:apiserver", "system:masters"),
		User("kube-controller-manager", "kube-controller-manager", "system:kube-controller-manager"),
		ServiceAccounts("kube-controller-manager", "kube-controller-manager-sa", "kube-system"),
		User("kube-scheduler", "kube-scheduler", "system:kube-scheduler"),
		User("csi-attacher", "csi-attacher", "strandlab:csi-attacher"),
		Group("kubelet-sim", "kubelet-sim", "system:nodes", "system:node:"),
	}
}

// request is what APF classifies a request by.
type request struct {
	user   string
	groups []string
	// A resource request: verb, API group, resource[/subresource] and
	// namespace ("" for a cluster-scoped object); path "" then.
	verb, group, resource, namespace string
	// A non-resource request: its path.
	path string
}

// firstMatch is the schema APF picks for r: the first one, in order of
// precedence then name, with a rule whose subjects and resource or
// non-resource rules match (as k8s.io/apiserver/pkg/util/flowcontrol's
// matchesFlowSchema does, for the rule shapes of the fixtures).
func firstMatch(t *testing.T, schemas []flowcontrolv1.FlowSchema, r request) flowcontrolv1.FlowSchema {
	t.Helper()
	ordered := slices.Clone(schemas)
	slices.SortFunc(ordered, func(a, b flowcontrolv1.FlowSchema) int {
		if a.Spec.MatchingPrecedence != b.Spec.MatchingPrecedence {
			return int(a.Spec.MatchingPrecedence - b.Spec.MatchingPrecedence)
		}
		return strings.Compare(a.Name, b.Name)
	})
	in := func(list []string, v string) bool { return slices.Contains(list, "*") || slices.Contains(list, v) }
	for _, fs := range ordered {
		for _, rule := range fs.Spec.Rules {
			if !slices.ContainsFunc(rule.Subjects, func(s flowcontrolv1.Subject) bool { return subjectMatches(s, r) }) {
				continue
			}
			if r.path != "" {
				if slices.ContainsFunc(rule.NonResourceRules, func(n flowcontrolv1.NonResourcePolicyRule) bool {
					return in(n.Verbs, r.verb) && in(n.NonResourceURLs, r.path)
				}) {
					return fs
				}
				continue
			}
			if slices.ContainsFunc(rule.ResourceRules, func(rr flowcontrolv1.ResourcePolicyRule) bool {
				return in(rr.Verbs, r.verb) && in(rr.APIGroups, r.group) && in(rr.Resources, r.resource) &&
					(r.namespace == "" && rr.ClusterScope || r.namespace != "" && in(rr.Namespaces, r.namespace))
			}) {
				return fs
			}
		}
	}
	t.Fatalf("no schema matches %+v", r)
	return flowcontrolv1.FlowSchema{}
}

// distinguisher is a schema's flow distinguisher method, "" for none.
func distinguisher(fs flowcontrolv1.FlowSchema) flowcontrolv1.FlowDistinguisherMethodType {
	if fs.Spec.DistinguisherMethod == nil {
		return ""
	}
	return fs.Spec.DistinguisherMethod.Type
}

func subjectMatches(s flowcontrolv1.Subject, r request) bool {
	switch s.Kind {
	case flowcontrolv1.SubjectKindUser:
		return s.User.Name == "*" || s.User.Name == r.user
	case flowcontrolv1.SubjectKindGroup:
		return s.Group.Name == "*" || slices.Contains(r.groups, s.Group.Name)
	default:
		prefix := "system:serviceaccount:" + s.ServiceAccount.Namespace + ":"
		if s.ServiceAccount.Name == "*" {
			return strings.HasPrefix(r.user, prefix)
		}
		return r.user == prefix+s.ServiceAccount.Name
	}
}

// TestPlanKeepsEveryRequestsPriorityLevel classifies requests of every
// identity, and of a stranger, against the defaults alone and with the
// planned copies: the priority level and distinguisher must not change,
// and the schema picked with the copies must be one of the request's
// client (or none of ours, for the stranger).
func TestPlanKeepsEveryRequestsPriorityLevel(t *testing.T) {
	p, err := Plan(defaults(), identities())
	if err != nil {
		t.Fatal(err)
	}
	masters := []string{"system:masters", "system:authenticated"}
	authenticated := []string{"system:authenticated"}
	sa := []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	nodes := []string{"system:nodes", "system:authenticated"}
	tests := []struct {
		name       string
		r          request
		wantClient string // "" for none of ours
		wantPL     string
	}{
		// system:masters: the schema "exempt" cannot be copied.
		{"harness lists pods", request{user: "strandlab-admin", groups: masters, verb: "list", resource: "pods", namespace: "strandlab"}, "", "exempt"},
		{"harness reads /metrics", request{user: "strandlab-admin", groups: masters, verb: "get", path: "/metrics"}, "", "exempt"},
		{"harness probes /readyz", request{user: "strandlab-admin", groups: masters, verb: "get", path: "/readyz"}, "", "exempt"},
		{"API server loopback", request{user: "system:apiserver", groups: masters, verb: "list", group: "flowcontrol.apiserver.k8s.io", resource: "flowschemas"}, "", "exempt"},
		{"controller manager patches a node", request{user: "system:kube-controller-manager", groups: authenticated, verb: "patch", resource: "nodes/status"}, "kube-controller-manager", "workload-high"},
		{"controller manager's lease", request{user: "system:kube-controller-manager", groups: authenticated, verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"}, "kube-controller-manager", "leader-election"},
		{"controller manager probes", request{user: "system:kube-controller-manager", groups: authenticated, verb: "get", path: "/healthz"}, "kube-controller-manager", "exempt"},
		{"attach/detach controller's account", request{user: "system:serviceaccount:kube-system:attachdetach-controller", groups: sa, verb: "patch", resource: "nodes/status"}, "kube-controller-manager", "workload-high"},
		{"a controller account's lease", request{user: "system:serviceaccount:kube-system:x", groups: sa, verb: "get", group: "coordination.k8s.io", resource: "leases", namespace: "kube-system"}, "kube-controller-manager", "leader-election"},
		{"scheduler binds", request{user: "system:kube-scheduler", groups: authenticated, verb: "create", resource: "pods/binding", namespace: "strandlab"}, "kube-scheduler", "workload-high"},
		{"attacher updates an attachment", request{user: "strandlab:csi-attacher", groups: authenticated, verb: "patch", group: "storage.k8s.io", resource: "volumeattachments/status"}, "csi-attacher", "global-default"},
		{"attacher probes", request{user: "strandlab:csi-attacher", groups: authenticated, verb: "get", path: "/livez"}, "csi-attacher", "exempt"},
		{"kubelet's node status", request{user: "system:node:node-1", groups: nodes, verb: "patch", resource: "nodes/status"}, "kubelet-sim", "node-high"},
		{"kubelet's lease", request{user: "system:node:node-2", groups: nodes, verb: "update", group: "coordination.k8s.io", resource: "leases", namespace: "kube-node-lease"}, "kubelet-sim", "node-high"},
		{"kubelet reads a pod", request{user: "system:node:node-1", groups: nodes, verb: "get", resource: "pods", namespace: "strandlab"}, "kubelet-sim", "system"},
		{"another service account", request{user: "system:serviceaccount:strandlab:default", groups: []string{"system:serviceaccounts", "system:authenticated"}, verb: "get", resource: "pods", namespace: "strandlab"}, "", "workload-low"},
		{"a stranger", request{user: "alice", groups: authenticated, verb: "get", resource: "pods", namespace: "strandlab"}, "", "global-default"},
		{"anonymous probe", request{user: "system:anonymous", groups: []string{"system:unauthenticated"}, verb: "get", path: "/healthz"}, "", "exempt"},
	}
	withCopies := append(defaults(), p.Schemas...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, after := firstMatch(t, defaults(), tt.r), firstMatch(t, withCopies, tt.r)
			if before.Spec.PriorityLevelConfiguration.Name != tt.wantPL {
				t.Fatalf("fixture: the defaults put it in %s, the test expects %s", before.Spec.PriorityLevelConfiguration.Name, tt.wantPL)
			}
			if after.Spec.PriorityLevelConfiguration != before.Spec.PriorityLevelConfiguration {
				t.Errorf("priority level %s with the copies (schema %s), %s without (schema %s)",
					after.Spec.PriorityLevelConfiguration.Name, after.Name, before.Spec.PriorityLevelConfiguration.Name, before.Name)
			}
			if distinguisher(after) != distinguisher(before) {
				t.Errorf("distinguisher %v with the copies, %v without", after.Spec.DistinguisherMethod, before.Spec.DistinguisherMethod)
			}
			if got := p.Clients[after.Name]; got != tt.wantClient {
				t.Errorf("counted for %q (schema %s), want %q", got, after.Name, tt.wantClient)
			}
			if tt.wantClient != "" && after.Annotations[AnnotationCopyOf] != before.Name {
				t.Errorf("schema %s copies %q, want the schema it replaces, %s", after.Name, after.Annotations[AnnotationCopyOf], before.Name)
			}
		})
	}
}

// TestPlanCopiesOnlyWhatIsReachable: an identity's copies stop at the
// first schema that matches all of its requests.
func TestPlanCopiesOnlyWhatIsReachable(t *testing.T) {
	p, err := Plan(defaults(), identities())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, fs := range p.Schemas {
		label := strings.TrimSuffix(strings.TrimPrefix(fs.Name, SchemaPrefix), "-"+fs.Annotations[AnnotationCopyOf])
		got[label] = append(got[label], fs.Annotations[AnnotationCopyOf])
		if fs.Labels[LabelManagedBy] != "strandlab" {
			t.Errorf("%s: labels %v", fs.Name, fs.Labels)
		}
		for _, r := range fs.Spec.Rules {
			if len(r.Subjects) != 1 {
				t.Errorf("%s: subjects %v, want the identity's alone", fs.Name, r.Subjects)
			}
		}
	}
	// harness and kube-apiserver (system:masters) have none: "exempt"
	// (precedence 1) cannot be copied, and takes all of their requests.
	want := map[string][]string{
		"kube-controller-manager":    {"probes", "system-leader-election", "kube-controller-manager"},
		"kube-controller-manager-sa": {"probes", "system-leader-election", "kube-system-service-accounts"},
		"kube-scheduler":             {"probes", "system-leader-election", "kube-scheduler"},
		"csi-attacher":               {"probes", "global-default"},
		"kubelet-sim":                {"probes", "system-node-high", "system-nodes"},
	}
	if !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("copies per identity:\n got %v\nwant %v", got, want)
	}
	if len(p.Clients) != len(p.Schemas) {
		t.Errorf("%d clients for %d schemas", len(p.Clients), len(p.Schemas))
	}
}

func TestPlanRefuses(t *testing.T) {
	tests := []struct {
		name     string
		existing []flowcontrolv1.FlowSchema
		ids      []Identity
		want     string
	}{
		{
			name: "a schema matching some of an identity's requesters",
			existing: append(defaults(), schema("one-controller", "workload-high", 850, byNamespace,
				everything([]flowcontrolv1.Subject{serviceAccount("kube-system", "attachdetach-controller")}))),
			ids:  identities(),
			want: `FlowSchema "one-controller", rule 0: its subjects match some requesters of identity "kube-controller-manager-sa"`,
		},
		{
			name:     "a user named like a group identity's members",
			existing: append(defaults(), schema("node-1", "system", 450, byUser, everything(users("system:node:node-1")))),
			ids:      identities(),
			want:     `FlowSchema "node-1", rule 0: its subjects match some requesters of identity "kubelet-sim"`,
		},
		{
			name:     "a schema that sorts before the copies",
			existing: append(defaults(), schema("0-first", "workload-high", 800, byNamespace, everything(users("bob")))),
			ids:      identities(),
			want:     `FlowSchema "0-first" (matchingPrecedence 800) would sort before the copy`,
		},
		{
			name:     "identities that can be one user",
			existing: defaults(),
			ids:      []Identity{User("a", "a", "system:node:node-1"), Group("b", "b", "system:nodes", "system:node:")},
			want:     `identities "b" and "a" can be the same user`,
		},
		{
			name:     "a label used twice",
			existing: defaults(),
			ids:      []Identity{User("a", "x", "alice"), User("b", "x", "bob")},
			want:     `identity label "x" is used twice`,
		},
		{
			name:     "a label that cannot name a schema",
			existing: defaults(),
			ids:      []Identity{User("a", "Not_DNS", "alice")},
			want:     `identity label "Not_DNS"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Plan(tt.existing, tt.ids)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Plan: %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestParseDispatched(t *testing.T) {
	const text = `# HELP apiserver_flowcontrol_dispatched_requests_total [BETA] Number of requests executed by API Priority and Fairness subsystem
# TYPE apiserver_flowcontrol_dispatched_requests_total counter
apiserver_flowcontrol_dispatched_requests_total{flow_schema="0-strandlab-harness-exempt",priority_level="exempt"} 120
apiserver_flowcontrol_dispatched_requests_total{flow_schema="exempt",priority_level="exempt"} 7
apiserver_flowcontrol_dispatched_requests_total{flow_schema="global-default",priority_level="global-default"} 3
# HELP apiserver_request_total [STABLE] Counter of apiserver requests
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",verb="GET"} 99
`
	got, err := ParseDispatched(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"0-strandlab-harness-exempt": 120, "exempt": 7, "global-default": 3}
	if !maps.Equal(got, want) {
		t.Errorf("ParseDispatched = %v, want %v", got, want)
	}
	for _, bad := range []string{"apiserver_request_total 1\n", "not a metric line {\n"} {
		if _, err := ParseDispatched(strings.NewReader(bad)); err == nil {
			t.Errorf("ParseDispatched(%q): no error", bad)
		}
	}
}

func TestByClient(t *testing.T) {
	got := ByClient(map[string]float64{"0-strandlab-kcm-probes": 1, "0-strandlab-kcm-kube-controller-manager": 40, "0-strandlab-kcm-sa-x": 9, "exempt": 2, "probes": 1},
		map[string]string{"0-strandlab-kcm-probes": "kube-controller-manager", "0-strandlab-kcm-kube-controller-manager": "kube-controller-manager", "0-strandlab-kcm-sa-x": "kube-controller-manager"})
	want := usage.Counter{"kube-controller-manager": 50, Other: 3}
	if !maps.Equal(got, want) {
		t.Errorf("ByClient = %v, want %v", got, want)
	}
}
