package projection

import (
	"fmt"
	"math/rand/v2"
	"sort"
)

// A test universe: a fixed set of object identities (kind, namespace, name)
// whose versions vary with a small variant number. Owners resolve by uid,
// selectors match labels, orgs and uids change with the variant, so random
// sequences exercise ownership, adoption, orphans, scope moves and sites.

type identity struct {
	kind      Kind
	namespace string
	name      string
	app       string // the app it belongs to, for owners and labels
	rs        string // a pod's ReplicaSet
}

func (id identity) key() ObjectKey { return ObjectKey{id.kind, id.namespace, id.name} }

// universe returns the identities of apps apps per namespace, in a fixed order.
func universe(namespaces []string, apps, rsPerApp, podsPerRS int) []identity {
	var out []identity
	for _, ns := range namespaces {
		for a := 0; a < apps; a++ {
			app := fmt.Sprintf("app%d", a)
			out = append(out,
				identity{KindApp, ns, app, app, ""},
				identity{KindDeployment, ns, app, app, ""},
				identity{KindService, ns, app, app, ""},
				identity{KindConfigMap, ns, app + "-replicate-config", app, ""},
				identity{KindIngress, ns, app, app, ""},
			)
			for r := 0; r < rsPerApp; r++ {
				rs := fmt.Sprintf("%s-rs%d", app, r)
				out = append(out, identity{KindReplicaSet, ns, rs, app, ""})
				for p := 0; p < podsPerRS; p++ {
					out = append(out, identity{KindPod, ns, fmt.Sprintf("%s-p%d", rs, p), app, rs})
				}
			}
		}
		out = append(out,
			identity{KindMiddleware, ns, "site", "site", ""},
			identity{KindMiddleware, ns, "app1-static", "site", ""},
			identity{KindIngressRoute, ns, "site", "site", ""},
			identity{KindCDApplication, ns, "cd", "cd", ""},
			identity{KindAppProject, ns, "proj", "proj", ""},
		)
	}
	return out
}

func uidOf(kind Kind, ns, name string, generation int) string {
	return fmt.Sprintf("%s/%s/%s/%d", kind, ns, name, generation)
}

// build returns one version of an identity. The variant picks statuses,
// labels, the org, and (for Apps and ReplicaSets) which of two uids the
// object has — children always name generation 0 of their owner, so a
// recreated owner leaves its children to name matching and selectors.
func (id identity) build(variant int) *Object {
	v := variant
	o := &Object{
		Kind:            id.kind,
		Namespace:       id.namespace,
		Name:            id.name,
		UID:             uidOf(id.kind, id.namespace, id.name, 0),
		ResourceVersion: fmt.Sprint(1000 + v),
		Generation:      int64(1 + v%2),
		Created:         int64(1_700_000_000 + v),
	}
	org := []string{"acme", "globex", ""}[v%3]
	appLabels := Labels{{"app.kubernetes.io/instance", id.app}}
	switch id.kind {
	case KindApp:
		if v%5 == 4 {
			o.UID = uidOf(id.kind, id.namespace, id.name, 1)
		}
		if org != "" {
			o.Labels = Labels{{LabelOrg, org}}
		}
		o.Spec = &AppSpec{
			Repository: "ghcr.io/hanzoai/" + id.app, Tag: fmt.Sprintf("v1.%d.0", v%3),
			Replicas: int32(v % 3), HasStatus: v%4 != 0, Phase: []string{"Running", "Creating", "Degraded"}[v%3],
			ReadyReplicas: int32(v % 2), ObservedGeneration: 1, SyncRequestedAt: []string{"", "2026-11-01T00:00:00Z"}[v%2],
			UpgradeHistory: []Upgrade{{Tag: "v0.9.0", StartedAt: 1_600_000_000}},
		}
		// What the spec feeds besides the tree: history, endpoints.
		spec := o.Spec.(*AppSpec)
		if v%4 == 1 {
			spec.UpgradeHistory = append(spec.UpgradeHistory, Upgrade{Tag: "v0.8.0", StartedAt: 1_500_000_000})
		}
		switch v % 6 {
		case 2:
			spec.Endpoints = []string{"https://" + id.app + ".hanzo.ai"}
		case 3:
			spec.Ingress = AppIngress{Enabled: true, Hosts: []string{id.app + ".apps.example.com"}}
		}
	case KindDeployment, KindReplicaSet:
		r := int32(v % 3)
		ws := &WorkloadSpec{
			Replicas:   &r,
			Selector:   Selector{MatchLabels: appLabels},
			Containers: []Container{{Name: "c", Image: fmt.Sprintf("ghcr.io/hanzoai/%s:v1.%d.0", id.app, v%3)}},
			Revision:   fmt.Sprint(1 + v%4), RevisionID: int64(1 + v%4), ObservedGeneration: 1, UpdatedReplicas: r, AvailableReplicas: int32(v % 2),
		}
		if v%7 == 6 {
			ws.Selector = Selector{Expressions: []Requirement{{Key: "app.kubernetes.io/instance", Operator: "In", Values: []string{id.app}}}}
		}
		o.Spec = ws
		o.Labels = appLabels
		if id.kind == KindDeployment {
			if v%6 != 5 { // otherwise kept by name only
				o.Owners = []OwnerRef{{Kind: "App", Name: id.app, UID: uidOf(KindApp, id.namespace, id.app, 0), Controller: true}}
			}
		} else {
			if v%5 == 4 {
				o.UID = uidOf(id.kind, id.namespace, id.name, 1)
			}
			o.Owners = []OwnerRef{{Kind: "Deployment", Name: id.app, UID: uidOf(KindDeployment, id.namespace, id.app, 0), Controller: true}}
		}
	case KindPod:
		o.Labels = append(Labels{{"app.kubernetes.io/instance", id.app}}, Label{"pod-template-hash", id.rs})
		if v%4 != 3 { // otherwise a bare pod, adopted by selector only
			o.Owners = []OwnerRef{{Kind: "ReplicaSet", Name: id.rs, UID: uidOf(KindReplicaSet, id.namespace, id.rs, 0), Controller: true}}
		}
		ps := &PodSpec{RestartPolicy: "Always", Containers: []Container{{Name: "c", Image: "ghcr.io/hanzoai/" + id.app + ":v1.0.0"}}, Phase: "Running", Ready: v%2 == 0}
		if v%3 == 2 {
			// Two reasons, one message: the health is the same, the
			// cause the App's health message names is not.
			reason := []string{"CrashLoopBackOff", "ImagePullBackOff"}[v/3%2]
			ps.Statuses = []ContainerStatus{{Name: "c", Waiting: true, WaitingReason: reason, WaitingMessage: "back-off"}}
		}
		o.Spec = ps
		o.Deleting = v%9 == 8
	case KindService:
		o.Owners = []OwnerRef{{Kind: "App", Name: id.app, UID: uidOf(KindApp, id.namespace, id.app, 0)}}
		o.Spec = &ServiceSpec{Type: []string{"ClusterIP", "LoadBalancer"}[v%2]}
	case KindConfigMap:
		o.Owners = []OwnerRef{{Kind: "App", Name: id.app, UID: uidOf(KindApp, id.namespace, id.app, 0)}}
	case KindIngress:
		o.Owners = []OwnerRef{{Kind: "App", Name: id.app, UID: uidOf(KindApp, id.namespace, id.app, 0)}}
		o.Spec = &IngressSpec{Hosts: []string{id.app + ".example.com"}}
		if v%2 == 1 {
			o.Spec.(*IngressSpec).LoadBalancer = []string{"10.0.0.1"}
		}
	case KindMiddleware:
		if org != "" {
			o.Labels = Labels{{LabelOrg, org}}
		}
		// The roots name the site after the root ("site", "app0", which an
		// App may hold), after the Middleware (an invalid last segment), or
		// leave it no site at all.
		o.Spec = &MiddlewareSpec{StaticRoot: []string{"/srv/site", "", "s3://cdn/app0", "s3://cdn/Site_Root/"}[v%4]}
	case KindIngressRoute:
		ir := &IngressRouteSpec{Routes: []Route{{Match: "Host(`site.example.com`)", Middlewares: []MiddlewareRef{{Name: "site"}, {Name: "app1-static"}}}}}
		if v%3 == 1 {
			ir.Routes = nil
		}
		o.Spec = ir
	case KindCDApplication:
		o.Spec = &CDApplicationSpec{Project: "p", SyncStatus: []string{"Synced", "OutOfSync", ""}[v%3], HealthStatus: []string{"Healthy", "Degraded", "bogus"}[v%3]}
	case KindAppProject:
	}
	return o
}

// step is one change in a generated history: a version of an identity, or
// its deletion.
type step struct {
	id      int
	del     bool
	variant int
}

// history generates, for a random subset of the identities, a sequence of
// intermediate versions and a final state (present with a final variant,
// or deleted), then interleaves the per-object sequences at random while
// keeping each object's own order — what informers guarantee.
func history(r *rand.Rand, ids []identity, intermediate bool) (steps []step, final map[int]int) {
	final = map[int]int{}
	var perObj [][]step
	for i := range ids {
		var seq []step
		if intermediate {
			for n := r.IntN(3); n > 0; n-- {
				if r.IntN(4) == 0 && len(seq) > 0 {
					seq = append(seq, step{id: i, del: true})
				} else {
					seq = append(seq, step{id: i, variant: r.IntN(40)})
				}
			}
		}
		if r.IntN(6) == 0 {
			if len(seq) > 0 {
				seq = append(seq, step{id: i, del: true})
			}
		} else {
			v := r.IntN(40)
			seq = append(seq, step{id: i, variant: v})
			final[i] = v
		}
		if len(seq) > 0 {
			perObj = append(perObj, seq)
		}
	}
	for len(perObj) > 0 {
		j := r.IntN(len(perObj))
		steps = append(steps, perObj[j][0])
		if perObj[j] = perObj[j][1:]; len(perObj[j]) == 0 {
			perObj = append(perObj[:j], perObj[j+1:]...)
		}
	}
	return steps, final
}

// applySteps applies steps in random batch sizes.
func applySteps(s *Store, r *rand.Rand, ids []identity, steps []step) error {
	for len(steps) > 0 {
		n := 1 + r.IntN(min(len(steps), 8))
		batch := make([]Change, 0, n)
		for _, st := range steps[:n] {
			id := ids[st.id]
			if st.del {
				batch = append(batch, Change{Op: Delete, Object: &Object{Kind: id.kind, Namespace: id.namespace, Name: id.name}})
			} else {
				batch = append(batch, Change{Op: Upsert, Object: id.build(st.variant)})
			}
		}
		if _, err := s.Apply(batch...); err != nil {
			return err
		}
		steps = steps[n:]
	}
	return nil
}

// reference applies the final state in identity order, in one batch.
func reference(ids []identity, final map[int]int) *Store {
	s := NewStore(DefaultConfig())
	keys := make([]int, 0, len(final))
	for i := range final {
		keys = append(keys, i)
	}
	sort.Ints(keys)
	var batch []Change
	for _, i := range keys {
		batch = append(batch, Change{Op: Upsert, Object: ids[i].build(final[i])})
	}
	if _, err := s.Apply(batch...); err != nil {
		panic(err)
	}
	return s
}
