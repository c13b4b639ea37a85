// Package apfcount counts the API server's requests per client without
// touching the clients: it plans FlowSchemas that copy, for each client
// identity, the FlowSchemas of API Priority and Fairness (APF) that the
// client's requests match, narrowed to that identity, with the same
// priority level, distinguisher and rules, ordered just before the schema
// each copies. Every request then lands in the same priority level as
// before (Plan's doc says why), and the API server's own counter
// apiserver_flowcontrol_dispatched_requests_total{flow_schema} counts it
// under a schema that names its client. ParseDispatched and ByClient read
// that counter. The package makes no API calls: the local provider creates
// the planned objects and scrapes /metrics (docs/performance.md).
package apfcount

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/strandlab/strandlab/internal/usage"
)

// Identity is one client identity of a cluster: the report's client name
// and who its requests come from.
type Identity struct {
	// Client is the report's name for the requests (several identities
	// may share one: kube-controller-manager's own user and its
	// controllers' service accounts).
	Client string
	// Label names the identity's FlowSchemas; distinct per identity.
	Label string
	// Subject is what the copies match: the identity's user, group or
	// service accounts.
	Subject flowcontrolv1.Subject
	// Name is the exact user name of every requester of the identity, or,
	// with NamePrefix, what every such user name begins with.
	Name       string
	NamePrefix bool
	// Groups are all the groups a requester of the identity has,
	// system:authenticated included.
	Groups []string
}

// User is the identity of one client certificate user with its groups.
func User(client, label, name string, groups ...string) Identity {
	return Identity{Client: client, Label: label, Name: name, Groups: slices.Concat(groups, []string{"system:authenticated"}),
		Subject: flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: name}}}
}

// ServiceAccounts is the identity of every service account of namespace.
func ServiceAccounts(client, label, namespace string) Identity {
	return Identity{Client: client, Label: label, Name: saPrefix(namespace), NamePrefix: true,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
		Subject: flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindServiceAccount,
			ServiceAccount: &flowcontrolv1.ServiceAccountSubject{Namespace: namespace, Name: flowcontrolv1.NameAll}}}
}

// Group is the identity of every member of group, whose user names all
// begin with namePrefix and who have no other group.
func Group(client, label, group, namePrefix string) Identity {
	return Identity{Client: client, Label: label, Name: namePrefix, NamePrefix: true, Groups: []string{group, "system:authenticated"},
		Subject: flowcontrolv1.Subject{Kind: flowcontrolv1.SubjectKindGroup, Group: &flowcontrolv1.GroupSubject{Name: group}}}
}

// saPrefix is what the user names of namespace's service accounts begin
// with (k8s.io/apiserver's serviceaccount.MakeUsername).
func saPrefix(namespace string) string { return "system:serviceaccount:" + namespace + ":" }

// SchemaPrefix begins the name of every planned FlowSchema. A digit sorts
// before every letter, and APF orders schemas of equal matchingPrecedence
// by name, so a copy with its original's precedence comes just before it
// (see Plan).
const SchemaPrefix = "0-strandlab-"

// LabelManagedBy marks the planned FlowSchemas.
const LabelManagedBy = "app.kubernetes.io/managed-by"

// AnnotationCopyOf names the FlowSchema a planned one copies.
const AnnotationCopyOf = "strandlab.io/copy-of"

// Schemas is what to create: the FlowSchemas and the client of each.
type Schemas struct {
	Schemas []flowcontrolv1.FlowSchema
	// Clients maps a planned FlowSchema's name to its identity's Client.
	Clients map[string]string
}

// Plan plans the schemas that count ids' requests: for each identity, it
// copies every FlowSchema of existing whose subjects match the identity's
// requesters (rule by rule: the rules that match them, with the
// identity's subject in place of the rule's), up to
// the first one that matches all of their requests (the later ones can
// never be reached by them). A copy keeps its original's priority level,
// distinguisher method, rules and matchingPrecedence, and is named
// SchemaPrefix + label + "-" + original name.
//
// APF takes the first schema that matches, in order of precedence then
// name. For a request of identity X whose first match was F, the copy of
// F matches it too (same rules, and X is among F's subjects), while no
// schema before the copy does: the schemas that can match X's requests
// are F's predecessors that match X (none matched this request), the
// copies of X's other schemas (ordered like their originals, the copy of
// F before F's successors: a successor has a higher precedence, or the
// same one and a name that sorts after the copy's, which Plan checks),
// and other identities' copies (the identities are disjoint, which Plan
// checks). So every request keeps its priority level and distinguisher;
// only the flow's name, and with it the queues its hash picks, change.
//
// A schema of matchingPrecedence 1 (the mandatory "exempt", the only one
// the API accepts there: system:masters) is not copied: a copy could not
// come before it. The requests it takes keep counting under its name, and
// the copies of the identity's later schemas still come after it.
//
// Plan refuses a schema whose subjects match part of an identity (e.g. one
// service account of a namespace whose every account is the identity): it
// cannot be narrowed without changing who matches it.
func Plan(existing []flowcontrolv1.FlowSchema, ids []Identity) (Schemas, error) {
	if err := checkIdentities(ids); err != nil {
		return Schemas{}, err
	}
	ordered := slices.Clone(existing)
	slices.SortFunc(ordered, func(a, b flowcontrolv1.FlowSchema) int {
		if a.Spec.MatchingPrecedence != b.Spec.MatchingPrecedence {
			return int(a.Spec.MatchingPrecedence) - int(b.Spec.MatchingPrecedence)
		}
		return strings.Compare(a.Name, b.Name)
	})
	p := Schemas{Clients: map[string]string{}}
	for _, id := range ids {
		for _, fs := range ordered {
			copied, total, err := narrow(fs, id)
			if err != nil {
				return Schemas{}, err
			}
			if copied == nil {
				continue
			}
			if copied.Spec.MatchingPrecedence <= 1 {
				// The API accepts matchingPrecedence 1 for the mandatory
				// schema "exempt" alone: a copy cannot come before it, so
				// the identity's requests that it takes count under its
				// own name (see Plan).
				if total {
					break
				}
				continue
			}
			for _, other := range ordered {
				if other.Spec.MatchingPrecedence == copied.Spec.MatchingPrecedence && other.Name <= copied.Name {
					return Schemas{}, fmt.Errorf("FlowSchema %q (matchingPrecedence %d) would sort before the copy %q of %q: the copy would not come just before its original",
						other.Name, other.Spec.MatchingPrecedence, copied.Name, fs.Name)
				}
			}
			p.Schemas = append(p.Schemas, *copied)
			p.Clients[copied.Name] = id.Client
			if total {
				break
			}
		}
	}
	return p, nil
}

// checkIdentities refuses identities that could both match one request
// (one user name can be in both), and labels that cannot name a schema.
func checkIdentities(ids []Identity) error {
	labels := map[string]bool{}
	for i, a := range ids {
		if a.Client == "" || a.Label == "" {
			return fmt.Errorf("identity %d: client and label must not be empty", i)
		}
		if labels[a.Label] {
			return fmt.Errorf("identity label %q is used twice", a.Label)
		}
		labels[a.Label] = true
		if errs := validation.IsDNS1123Subdomain(SchemaPrefix + a.Label + "-x"); len(errs) > 0 {
			return fmt.Errorf("identity label %q: %s", a.Label, strings.Join(errs, "; "))
		}
		for _, b := range ids[:i] {
			if namesMeet(a, b) {
				return fmt.Errorf("identities %q and %q can be the same user: a request would count for either", a.Label, b.Label)
			}
		}
	}
	return nil
}

// namesMeet reports whether one user name can belong to both identities.
func namesMeet(a, b Identity) bool {
	switch {
	case !a.NamePrefix && !b.NamePrefix:
		return a.Name == b.Name
	case a.NamePrefix && b.NamePrefix:
		return strings.HasPrefix(a.Name, b.Name) || strings.HasPrefix(b.Name, a.Name)
	case a.NamePrefix:
		return strings.HasPrefix(b.Name, a.Name)
	default:
		return strings.HasPrefix(a.Name, b.Name)
	}
}

// relation is how a set of requesters relates to an identity's.
type relation int

const (
	disjoint relation = iota // no requester of the identity is in the set
	partial                  // some are
	covers                   // all are
)

// narrow is fs's copy for id (nil when none of its rules match id's
// requesters) and whether the copy matches every request (so that no
// later schema is reached by id).
func narrow(fs flowcontrolv1.FlowSchema, id Identity) (*flowcontrolv1.FlowSchema, bool, error) {
	var rules []flowcontrolv1.PolicyRulesWithSubjects
	allResources, allNonResources := false, false
	for i, r := range fs.Spec.Rules {
		switch subjectsRelation(r.Subjects, id) {
		case disjoint:
			continue
		case partial:
			return nil, false, fmt.Errorf("FlowSchema %q, rule %d: its subjects match some requesters of identity %q, not all: it cannot be narrowed to them",
				fs.Name, i, id.Label)
		}
		r = *r.DeepCopy()
		r.Subjects = []flowcontrolv1.Subject{*id.Subject.DeepCopy()}
		rules = append(rules, r)
		allResources = allResources || slices.ContainsFunc(r.ResourceRules, everyResource)
		allNonResources = allNonResources || slices.ContainsFunc(r.NonResourceRules, everyNonResource)
	}
	if len(rules) == 0 {
		return nil, false, nil
	}
	c := &flowcontrolv1.FlowSchema{
		ObjectMeta: metav1.ObjectMeta{
			Name:        SchemaPrefix + id.Label + "-" + fs.Name,
			Labels:      map[string]string{LabelManagedBy: "strandlab"},
			Annotations: map[string]string{AnnotationCopyOf: fs.Name},
		},
		Spec: flowcontrolv1.FlowSchemaSpec{
			PriorityLevelConfiguration: fs.Spec.PriorityLevelConfiguration,
			MatchingPrecedence:         fs.Spec.MatchingPrecedence,
			DistinguisherMethod:        fs.Spec.DistinguisherMethod.DeepCopy(),
			Rules:                      rules,
		},
	}
	if errs := validation.IsDNS1123Subdomain(c.Name); len(errs) > 0 {
		return nil, false, fmt.Errorf("copy of FlowSchema %q: name %q: %s", fs.Name, c.Name, strings.Join(errs, "; "))
	}
	return c, allResources && allNonResources, nil
}

// everyResource and everyNonResource are rules that match any resource or
// non-resource request.
func everyResource(r flowcontrolv1.ResourcePolicyRule) bool {
	return slices.Contains(r.Verbs, flowcontrolv1.VerbAll) && slices.Contains(r.APIGroups, flowcontrolv1.APIGroupAll) &&
		slices.Contains(r.Resources, flowcontrolv1.ResourceAll) && r.ClusterScope && slices.Contains(r.Namespaces, flowcontrolv1.NamespaceEvery)
}

func everyNonResource(r flowcontrolv1.NonResourcePolicyRule) bool {
	return slices.Contains(r.Verbs, flowcontrolv1.VerbAll) && slices.Contains(r.NonResourceURLs, flowcontrolv1.NonResourceAll)
}

// subjectsRelation is how a rule's subjects (any of which matches) relate
// to id's requesters: covers if one subject matches them all, partial if
// none does but one matches some.
func subjectsRelation(subjects []flowcontrolv1.Subject, id Identity) relation {
	out := disjoint
	for _, s := range subjects {
		out = max(out, subjectRelation(s, id))
	}
	return out
}

// subjectRelation mirrors how APF matches a subject against a requester
// (k8s.io/apiserver/pkg/util/flowcontrol's matchesSubject): a user by
// name ("*": anyone), a group by membership ("*": anyone), a service
// account by its user name.
func subjectRelation(s flowcontrolv1.Subject, id Identity) relation {
	switch s.Kind {
	case flowcontrolv1.SubjectKindGroup:
		if s.Group != nil && (s.Group.Name == "*" || slices.Contains(id.Groups, s.Group.Name)) {
			return covers
		}
		return disjoint
	case flowcontrolv1.SubjectKindUser:
		if s.User == nil {
			return disjoint
		}
		if s.User.Name == flowcontrolv1.NameAll {
			return covers
		}
		return nameRelation(s.User.Name, false, id)
	case flowcontrolv1.SubjectKindServiceAccount:
		if s.ServiceAccount == nil {
			return disjoint
		}
		if s.ServiceAccount.Name == flowcontrolv1.NameAll {
			return nameRelation(saPrefix(s.ServiceAccount.Namespace), true, id)
		}
		return nameRelation(saPrefix(s.ServiceAccount.Namespace)+s.ServiceAccount.Name, false, id)
	}
	return disjoint
}

// nameRelation is how the user names equal to name (or beginning with it,
// with prefix) relate to id's requesters' names.
func nameRelation(name string, prefix bool, id Identity) relation {
	switch {
	case !id.NamePrefix && !prefix:
		if id.Name == name {
			return covers
		}
	case !id.NamePrefix && prefix:
		if strings.HasPrefix(id.Name, name) {
			return covers
		}
	case id.NamePrefix && !prefix:
		if strings.HasPrefix(name, id.Name) {
			return partial
		}
	default:
		if strings.HasPrefix(id.Name, name) {
			return covers
		}
		if strings.HasPrefix(name, id.Name) {
			return partial
		}
	}
	return disjoint
}

// DispatchedMetric is the API server's counter of the requests APF let
// through, by flow_schema and priority_level (k8s.io/apiserver's
// pkg/util/flowcontrol/metrics; exempt requests included: APF dispatches
// them like any other, without queuing). A watch counts once, when it
// starts.
const DispatchedMetric = "apiserver_flowcontrol_dispatched_requests_total"

// ParseDispatched reads DispatchedMetric from the API server's /metrics
// (Prometheus text format) and sums it per flow schema.
func ParseDispatched(r io.Reader) (map[string]float64, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the API server's metrics: %w", err)
	}
	mf, ok := families[DispatchedMetric]
	if !ok {
		return nil, errors.New("the API server's metrics have no " + DispatchedMetric)
	}
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "flow_schema" {
				out[l.GetValue()] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// Other is ByClient's client for requests of schemas that are not ours.
const Other = "other"

// ByClient sums dispatched requests per client: those of a planned schema
// to its client, the rest to Other.
func ByClient(dispatched map[string]float64, clients map[string]string) usage.Counter {
	out := usage.Counter{}
	for fs, n := range dispatched {
		c, ok := clients[fs]
		if !ok {
			c = Other
		}
		out[c] += n
	}
	return out
}
