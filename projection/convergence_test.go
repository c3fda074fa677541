package projection

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"testing"
)

var testNamespaces = []string{"hanzo", "hanzo-testnet", "tenant-acme", "tenant-globex"}

// TestConvergence applies the same final set of objects in many random
// orders, with and without interleaved intermediate versions and deletions,
// in random batch sizes: every order must give a byte-identical snapshot.
func TestConvergence(t *testing.T) {
	ids := universe(testNamespaces, 3, 2, 2)
	seeds := 60
	if testing.Short() {
		seeds = 10
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 7))
		_, final := history(r, ids, false)
		want := reference(ids, final).Snapshot().Canonical()
		for order := range 6 {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(order)))
			steps := finalOnly(r, final)
			if order%2 == 1 {
				steps = withIntermediates(r, ids, final)
			}
			s := NewStore(DefaultConfig())
			if err := applySteps(s, r, ids, steps); err != nil {
				t.Fatalf("seed %d order %d: %v", seed, order, err)
			}
			if err := checkInvariants(s); err != nil {
				t.Fatalf("seed %d order %d: %v", seed, order, err)
			}
			if got := s.Snapshot().Canonical(); !bytes.Equal(got, want) {
				t.Fatalf("seed %d order %d: snapshot differs from the reference order:\n%s", seed, order, lineDiff(string(want), string(got)))
			}
		}
	}
}

// finalOnly is the final state in a random order.
func finalOnly(r *rand.Rand, final map[int]int) []step {
	var steps []step
	for i, v := range final {
		steps = append(steps, step{id: i, variant: v})
	}
	slices.SortFunc(steps, func(a, b step) int { return a.id - b.id })
	r.Shuffle(len(steps), func(i, j int) { steps[i], steps[j] = steps[j], steps[i] })
	return steps
}

// withIntermediates reaches the same final state through other versions and
// deletions of each object, interleaved at random.
func withIntermediates(r *rand.Rand, ids []identity, final map[int]int) []step {
	var perObj [][]step
	for i := range ids {
		var seq []step
		for n := r.IntN(4); n > 0; n-- {
			if r.IntN(3) == 0 && len(seq) > 0 {
				seq = append(seq, step{id: i, del: true})
			} else {
				seq = append(seq, step{id: i, variant: r.IntN(40)})
			}
		}
		if v, ok := final[i]; ok {
			seq = append(seq, step{id: i, variant: v})
		} else if len(seq) > 0 {
			seq = append(seq, step{id: i, del: true})
		}
		if len(seq) > 0 {
			perObj = append(perObj, seq)
		}
	}
	var steps []step
	for len(perObj) > 0 {
		j := r.IntN(len(perObj))
		steps = append(steps, perObj[j][0])
		if perObj[j] = perObj[j][1:]; len(perObj[j]) == 0 {
			perObj = append(perObj[:j], perObj[j+1:]...)
		}
	}
	return steps
}

// TestDeleteEverything: deleting every object leaves an empty snapshot and
// empty indexes.
func TestDeleteEverything(t *testing.T) {
	ids := universe(testNamespaces, 3, 2, 2)
	r := rand.New(rand.NewPCG(1, 2))
	steps, _ := history(r, ids, true)
	s := NewStore(DefaultConfig())
	if err := applySteps(s, r, ids, steps); err != nil {
		t.Fatal(err)
	}
	var dels []step
	for i := range ids {
		dels = append(dels, step{id: i, del: true})
	}
	r.Shuffle(len(dels), func(i, j int) { dels[i], dels[j] = dels[j], dels[i] })
	if err := applySteps(s, r, ids, dels); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	if snap.Len() != 0 || len(snap.CDApplications()) != 0 || len(snap.Projects()) != 0 || len(snap.Namespaces()) != 0 {
		t.Fatalf("after deleting everything: %d rows, %d CD, %d projects, %d namespaces; want none",
			snap.Len(), len(snap.CDApplications()), len(snap.Projects()), len(snap.Namespaces()))
	}
	if got, want := snap.Canonical(), NewStore(DefaultConfig()).Snapshot().Canonical(); !bytes.Equal(got, want) {
		t.Fatalf("canonical form of the emptied store differs from an empty one:\n%s", lineDiff(string(want), string(got)))
	}
	for name, n := range map[string]int{
		"objects": len(s.objects), "uids": len(s.byUID), "children": len(s.children),
		"apps": len(s.rows), "sites": len(s.sites), "cds": len(s.cds), "orphans": len(s.pods.orphans),
		"orphan labels": len(s.pods.orphanByLabel), "orphan namespaces": len(s.pods.orphansByNS),
		"deployment anchors": len(s.pods.depByAnchor), "anchorless deployments": len(s.pods.depNoAnchor),
		"site objects": len(s.siteObjs), "projects": len(s.projectObjs),
	} {
		if n != 0 {
			t.Errorf("index %s holds %d entries after deleting everything; want 0", name, n)
		}
	}
}

// checkInvariants verifies what must hold after every Apply.
func checkInvariants(s *Store) error {
	snap := s.Snapshot()
	count := 0
	for i, nr := range snap.namespaces {
		if i > 0 && snap.namespaces[i-1].Namespace >= nr.Namespace {
			return fmt.Errorf("namespaces out of order at %s", nr.Namespace)
		}
		if len(nr.Rows) == 0 {
			return fmt.Errorf("namespace %s published with no rows", nr.Namespace)
		}
		env, org, _ := s.cfg.Namespaces.Env(nr.Namespace)
		if nr.Env != env || nr.Org != org {
			return fmt.Errorf("namespace %s: env %q org %q, want %q %q", nr.Namespace, nr.Env, nr.Org, env, org)
		}
		var tenant []*App
		for j, a := range nr.Rows {
			count++
			if a.Namespace != nr.Namespace {
				return fmt.Errorf("row %s filed under namespace %s", a.Key(), nr.Namespace)
			}
			if j > 0 && !nr.Rows[j-1].Key().less(a.Key()) {
				return fmt.Errorf("rows of %s out of order at %s", nr.Namespace, a.Name)
			}
			if want := s.row(a.Key()); want != a {
				return fmt.Errorf("published row %s is not the store's current row", a.Key())
			}
			if org != "" && a.Org == org {
				tenant = append(tenant, a)
			}
			if err := checkTree(s, a); err != nil {
				return err
			}
		}
		if !slices.Equal(tenant, nr.Tenant) {
			return fmt.Errorf("tenant index of %s lists %d rows, want %d", nr.Namespace, len(nr.Tenant), len(tenant))
		}
	}
	if count != snap.Len() || count != len(s.rows)+countSitesShown(s) {
		return fmt.Errorf("snapshot counts %d rows, namespaces hold %d, the store %d apps", snap.Len(), count, len(s.rows))
	}
	if len(snap.cd) != len(s.cds) {
		return fmt.Errorf("snapshot holds %d CD rows, the store %d", len(snap.cd), len(s.cds))
	}
	for _, a := range snap.cd {
		if s.cds[a.Key()] != a {
			return fmt.Errorf("published CD row %s is not current", a.Key())
		}
	}
	// Membership: an object is recorded in exactly the App trees holding it.
	for k, e := range s.objects {
		for r := range e.rows.all() {
			if s.rows[r.key] != r || r.app == nil || !treeHolds(r.app, k) {
				return fmt.Errorf("%v records row %s, whose tree does not hold it", k, r.key)
			}
		}
	}
	for ak, r := range s.rows {
		a := r.app
		if a == nil || r.queued || r.full || len(r.patches) > 0 {
			return fmt.Errorf("row handle %s is left without a row or still queued", ak)
		}
		for _, n := range a.Tree {
			e := s.objects[n.Obj.Key()]
			if e == nil || e.info != n {
				return fmt.Errorf("row %s holds %v at a version the store no longer has", ak, n.Obj.Key())
			}
			if !e.rows.has(r) {
				return fmt.Errorf("row %s holds %v, which does not record it", ak, n.Obj.Key())
			}
		}
	}
	return nil
}

func countSitesShown(s *Store) int {
	n := 0
	for k := range s.sites {
		if s.app(k) == nil {
			n++
		}
	}
	return n
}

func treeHolds(a *App, k ObjectKey) bool {
	for _, n := range a.Tree {
		if n.Obj.Key() == k {
			return true
		}
	}
	return false
}

// checkTree: one root; every parent resolves within the tree; an operator
// App's health is the worst of its nodes, with the message they give.
func checkTree(s *Store, a *App) error {
	if len(a.Tree) == 0 || len(a.parents) != len(a.Tree) || a.parents[0] != -1 {
		return fmt.Errorf("row %s: tree without a root", a.Key())
	}
	seen := map[*NodeInfo]bool{}
	for i, n := range a.Tree {
		if i > 0 && (a.parents[i] < 0 || int(a.parents[i]) >= i) {
			return fmt.Errorf("row %s: node %s has a parent outside the nodes before it", a.Key(), n.Ref())
		}
		if seen[n] {
			return fmt.Errorf("row %s: node %s twice", a.Key(), n.Ref())
		}
		seen[n] = true
	}
	// The shared encoded forms are those of this version.
	if got, want := a.ApplicationJSON(), mustJSON(a.Application()); !bytes.Equal(got, want) {
		return fmt.Errorf("row %s: its encoded Application is stale:\n%s\nwant\n%s", a.Key(), got, want)
	}
	if got, want := a.ApplicationTreeJSON(), mustJSON(a.ApplicationTree()); !bytes.Equal(got, want) {
		return fmt.Errorf("row %s: its encoded tree is stale", a.Key())
	}
	if a.Row == RowApp {
		worst := HealthHealthy
		for _, n := range a.Tree {
			if n.HasHealth && n.Health.Status.Worse(worst) {
				worst = n.Health.Status
			}
		}
		if a.Health.Status != worst {
			return fmt.Errorf("row %s: health %s, the worst of its nodes is %s", a.Key(), a.Health.Status, worst)
		}
		// And its message is the one a reading of every node gives.
		if want := appHealth(a.Tree, Health{}); a.Health != want {
			return fmt.Errorf("row %s: health %+v, its nodes give %+v", a.Key(), a.Health, want)
		}
	}
	return nil
}

// TestApplyRejects: kinds outside the registry (Secret above all, and the
// health-only kinds) and namespaces outside the map are refused, the rest
// of the batch applies.
func TestApplyRejects(t *testing.T) {
	if _, err := Decode(map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "hanzo"}}); !errors.Is(err, ErrUnknownKind) {
		t.Fatalf("Decode(Secret): got %v, want ErrUnknownKind", err)
	}
	s := NewStore(DefaultConfig())
	ok := universe([]string{"hanzo"}, 1, 0, 0)[0].build(1)
	deltas, err := s.Apply(
		Change{Op: Upsert, Object: &Object{Kind: KindUnknown, Namespace: "hanzo", Name: "secret"}},
		Change{Op: Upsert, Object: &Object{Kind: KindJob, Namespace: "hanzo", Name: "job"}},
		Change{Op: Upsert, Object: &Object{Kind: KindApp, Namespace: "kube-system", Name: "x"}},
		Change{Op: Upsert, Object: ok},
	)
	if !errors.Is(err, ErrRejected) {
		t.Fatalf("got error %v, want ErrRejected", err)
	}
	if len(deltas) != 1 || deltas[0].Key != (AppKey{"hanzo", "app0"}) {
		t.Fatalf("got deltas %v, want one for hanzo/app0", deltas)
	}
	if len(s.objects) != 1 {
		t.Fatalf("store holds %d objects, want 1", len(s.objects))
	}
}

// A row's first delta is ADDED, its last DELETED, the ones between MODIFIED.
func TestDeltaTypes(t *testing.T) {
	s := NewStore(DefaultConfig())
	id := identity{KindApp, "hanzo", "app0", "app0", ""}
	want := []EventType{Added, Modified, Deleted}
	changes := []Change{{Op: Upsert, Object: id.build(0)}, {Op: Upsert, Object: id.build(1)}, {Op: Delete, Object: id.build(1)}}
	for i, c := range changes {
		deltas, err := s.Apply(c)
		if err != nil || len(deltas) != 1 {
			t.Fatalf("change %d: %d deltas, %v", i, len(deltas), err)
		}
		if got := deltas[0].Type(); got != want[i] {
			t.Errorf("change %d: delta type %s, want %s", i, got, want[i])
		}
	}
}

// A row's new version keeps the encoded form of a part that did not change
// (the same bytes, not encoded again) and starts without the other's.
func TestEncodedFormsHandedOn(t *testing.T) {
	s := NewStore(DefaultConfig())
	if _, err := s.Apply(upserts(benchApp("hanzo", "", "web", 0))...); err != nil {
		t.Fatal(err)
	}
	old := s.app(AppKey{"hanzo", "web"})
	argo, tree := old.ApplicationJSON(), old.ApplicationTreeJSON()
	// A restart count moves: the tree changes, the Application does not.
	deltas, err := s.Apply(Change{Op: Upsert, Object: benchPod("hanzo", "web-rs9", "web-rs9-0", "web", "hanzo-rs-web-rs9", "ghcr.io/hanzoai/web:v1.9.0", 2, false)})
	if err != nil || len(deltas) != 1 {
		t.Fatalf("%d deltas, %v", len(deltas), err)
	}
	d := deltas[0]
	if d.AppChanged || !d.TreeChanged {
		t.Fatalf("AppChanged %v TreeChanged %v, want false, true", d.AppChanged, d.TreeChanged)
	}
	if got := d.New.argo.p.Load(); got == nil || &(*got)[0] != &argo[0] {
		t.Error("the unchanged Application's encoded form was not handed on")
	}
	if d.New.tree.p.Load() != nil {
		t.Error("the changed tree's version starts with an encoded form")
	}
	if got := d.New.ApplicationTreeJSON(); string(got) == string(tree) {
		t.Error("the changed tree encodes as before")
	}
}

// App.next copies every field but the encoded forms: a field added to App
// and not to next fails here.
func TestAppNext(t *testing.T) {
	a := &App{AppMeta: &AppMeta{}, AppRollout: &AppRollout{}, Health: Health{Status: HealthDegraded}, Tree: []*NodeInfo{{}}, parents: rootOnly, Revision: 3, TreeRevision: 4, ResourceVersion: 5, Removed: 6}
	b := []byte("{}")
	a.argo.p.Store(&b)
	a.tree.p.Store(&b)
	n := a.next()
	av, nv := reflect.ValueOf(a).Elem(), reflect.ValueOf(n).Elem()
	for i := range av.NumField() {
		f := av.Type().Field(i)
		switch f.Name {
		case "argo", "tree":
			continue
		}
		if av.Field(i).IsZero() {
			t.Fatalf("field %s is not set in this test: set it", f.Name)
		}
		if !reflect.DeepEqual(reflect.NewAt(f.Type, av.Field(i).Addr().UnsafePointer()).Elem().Interface(), reflect.NewAt(f.Type, nv.Field(i).Addr().UnsafePointer()).Elem().Interface()) {
			t.Errorf("next does not copy %s", f.Name)
		}
	}
	if n.argo.p.Load() != nil || n.tree.p.Load() != nil {
		t.Error("next copies the encoded forms")
	}
}

// Readers encode rows while the writer folds new versions that hand encoded
// forms on (run with -race), and every row's encoded forms end equal to a
// fresh encoding of the row.
func TestEncodedFormsConcurrent(t *testing.T) {
	s := NewStore(DefaultConfig())
	for i := range 3 {
		if _, err := s.Apply(upserts(benchApp("hanzo", "", fmt.Sprintf("app-%d", i), 0))...); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				for a := range s.Snapshot().Apps() {
					a.ApplicationJSON()
					a.ApplicationTreeJSON()
				}
			}
		})
	}
	for v := 1; v <= 300; v++ {
		name := fmt.Sprintf("app-%d", v%3)
		objs := benchApp("hanzo", "", name, v)
		// A pod's status (the tree changes), now and then the App's or the
		// Deployment's (the Application changes too).
		changes := []Change{{Op: Upsert, Object: benchPod("hanzo", name+"-rs9", name+"-rs9-1", name, "hanzo-rs-"+name+"-rs9", "ghcr.io/hanzoai/"+name+":v1.9.0", v, false)}}
		if v%7 == 0 {
			changes = append(changes, Change{Op: Upsert, Object: objs[0]}, Change{Op: Upsert, Object: objs[1]})
		}
		if _, err := s.Apply(changes...); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	wg.Wait()
	for a := range s.Snapshot().Apps() {
		if got, want := a.ApplicationJSON(), mustJSON(a.Application()); !bytes.Equal(got, want) {
			t.Errorf("%s: encoded Application differs from the row's:\n%s\nwant\n%s", a.Key(), got, want)
		}
		if got, want := a.ApplicationTreeJSON(), mustJSON(a.ApplicationTree()); !bytes.Equal(got, want) {
			t.Errorf("%s: encoded tree differs from the row's", a.Key())
		}
	}
}

// A patched row's health, worked out from its changed nodes alone where it
// can be, is what a reading of every node gives: one node or two turning a
// healthy App worse in one batch, back, and a change within the worst.
func TestPatchedHealth(t *testing.T) {
	s := NewStore(DefaultConfig())
	const v = 3 // every object ready: a healthy App
	if _, err := s.Apply(upserts(benchApp("hanzo", "", "web", v))...); err != nil {
		t.Fatal(err)
	}
	pod := func(i, version int) Change {
		return Change{Op: Upsert, Object: benchPod("hanzo", "web-rs9", fmt.Sprintf("web-rs9-%d", i), "web", "hanzo-rs-web-rs9", "ghcr.io/hanzoai/web:v1.9.0", version, false)}
	}
	crash := func(i int) Change {
		c := pod(i, v)
		p := *c.Object.Spec.(*PodSpec)
		p.Statuses = []ContainerStatus{{Name: "app", Image: "ghcr.io/hanzoai/web:v1.9.0", Waiting: true, WaitingReason: "CrashLoopBackOff"}}
		p.Ready = false
		o := *c.Object
		o.Spec = &p
		return Change{Op: Upsert, Object: &o}
	}
	app := func() *App { return s.app(AppKey{"hanzo", "web"}) }
	if h := app().Health; h.Status != HealthHealthy {
		t.Fatalf("start: health %+v, want Healthy", h)
	}
	for _, step := range []struct {
		name    string
		changes []Change
		want    HealthCode
	}{
		{"one pod not ready", []Change{pod(0, 11)}, HealthProgressing},
		{"it is ready again", []Change{pod(0, v)}, HealthHealthy},
		{"two pods not ready in one batch", []Change{pod(0, 11), pod(1, 11)}, HealthProgressing},
		{"both ready again", []Change{pod(0, v), pod(1, v)}, HealthHealthy},
		{"one crashes, one not ready", []Change{crash(2), pod(1, 11)}, HealthDegraded},
		{"the one not ready is ready", []Change{pod(1, v)}, HealthDegraded},
		{"another crashes", []Change{crash(0)}, HealthDegraded},
		{"all ready", []Change{pod(0, v), pod(2, v)}, HealthHealthy},
	} {
		if _, err := s.Apply(step.changes...); err != nil {
			t.Fatal(err)
		}
		a := app()
		if a.Health.Status != step.want {
			t.Errorf("%s: health %s, want %s", step.name, a.Health.Status, step.want)
		}
		if want := appHealth(a.Tree, Health{}); a.Health != want {
			t.Errorf("%s: health %+v, its nodes give %+v", step.name, a.Health, want)
		}
	}
}
