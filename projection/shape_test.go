package projection

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// The fingerprint Apply compares agrees with sameShape on every pair of
// versions the generated universe holds, and on targeted edits of each
// part of a shape.
func TestShapeFingerprint(t *testing.T) {
	ids := universe([]string{"hanzo", "tenant-acme"}, 2, 2, 2)
	pairs := 0
	for _, id := range ids {
		for v := range 12 {
			for w := range 12 {
				a, b := id.build(v), id.build(w)
				checkShapePair(t, a, b)
				pairs++
			}
		}
	}
	pod := universe([]string{"hanzo"}, 1, 1, 1)
	var base *Object
	for _, id := range pod {
		if id.kind == KindPod {
			base = id.build(0)
		}
	}
	dep := ids[slices.IndexFunc(ids, func(id identity) bool { return id.kind == KindDeployment })].build(0)
	edits := map[string]func(o *Object){
		"uid":         func(o *Object) { o.UID += "x" },
		"owner uid":   func(o *Object) { o.Owners = []OwnerRef{{Kind: "ReplicaSet", Name: "x", UID: "other"}} },
		"no owner":    func(o *Object) { o.Owners = nil },
		"label value": func(o *Object) { o.Labels = Labels{{"app.kubernetes.io/instance", "other"}} },
		"label added": func(o *Object) { o.Labels = append(slices.Clone(o.Labels), Label{"k", "v"}) },
		"label split": func(o *Object) { o.Labels = Labels{{"app.kubernetes.io/instance" + "p", "od-template-hash"}} },
		"status":      func(o *Object) { o.ResourceVersion += "1" },
		"owner name":  func(o *Object) { o.Owners = []OwnerRef{{Kind: "ReplicaSet", Name: "renamed", UID: o.Owners[0].UID}} },
	}
	for name, edit := range edits {
		for _, o := range []*Object{base, dep} {
			if name == "owner name" && len(o.Owners) == 0 {
				continue
			}
			c := *o
			edit(&c)
			checkShapePair(t, o, &c)
		}
	}
	selectors := map[string]Selector{
		"invalid":           {MatchLabels: Labels{{"app.kubernetes.io/instance", "a"}}, Invalid: true},
		"expression":        {Expressions: []Requirement{{Key: "app.kubernetes.io/instance", Operator: "In", Values: []string{"a"}}}},
		"expression values": {Expressions: []Requirement{{Key: "app.kubernetes.io/instance", Operator: "In", Values: []string{"a", "b"}}}},
		"expression op":     {Expressions: []Requirement{{Key: "app.kubernetes.io/instance", Operator: "NotIn", Values: []string{"a"}}}},
		"empty":             {},
	}
	for _, x := range selectors {
		for _, y := range selectors {
			a, b := *dep, *dep
			wa, wb := *dep.Spec.(*WorkloadSpec), *dep.Spec.(*WorkloadSpec)
			wa.Selector, wb.Selector = x, y
			a.Spec, b.Spec = &wa, &wb
			checkShapePair(t, &a, &b)
		}
	}
	if pairs == 0 || base == nil {
		t.Fatal("the universe generated nothing to compare")
	}
}

func checkShapePair(t *testing.T, a, b *Object) {
	t.Helper()
	fa, fb := shapeOf(a), shapeOf(b)
	switch a.Kind {
	case KindMiddleware, KindIngressRoute, KindCDApplication, KindAppProject:
		if fa != 0 || fb != 0 {
			t.Fatalf("%s has a shape fingerprint; it always takes the full path", a.Kind)
		}
		return
	}
	if fa == 0 || fb == 0 {
		t.Fatalf("%s %s has no shape fingerprint", a.Kind, a.Name)
	}
	if got, want := fa == fb, sameShape(a, b); got != want {
		t.Fatalf("%s %s: fingerprints equal %v, sameShape %v\n a: %+v\n b: %+v", a.Kind, a.Name, got, want, a, b)
	}
}

// rowSet behaves as a set over any sequence of adds and removes, whether it
// holds its rows inline or spilled.
func TestRowSet(t *testing.T) {
	rows := make([]*appRow, 5)
	for i := range rows {
		rows[i] = &appRow{key: AppKey{"ns", string(rune('a' + i))}}
	}
	var rs rowSet
	model := map[*appRow]bool{}
	r := rand.New(rand.NewPCG(7, 7))
	for step := range 2000 {
		x := rows[r.IntN(len(rows))]
		if r.IntN(2) == 0 {
			rs.add(x)
			model[x] = true
		} else {
			rs.remove(x)
			delete(model, x)
		}
		var got []*appRow
		for y := range rs.all() {
			got = append(got, y)
		}
		if len(got) != len(model) {
			t.Fatalf("step %d: set holds %d rows, want %d", step, len(got), len(model))
		}
		for _, y := range rows {
			if rs.has(y) != model[y] || slices.Contains(got, y) != model[y] {
				t.Fatalf("step %d: row %s held %v, want %v", step, y.key.Name, rs.has(y), model[y])
			}
		}
		if len(model) <= 1 && rs.more != nil {
			t.Fatalf("step %d: %d rows, still spilled", step, len(model))
		}
	}
}

// Two versions run the same images exactly when their image fingerprints
// agree: names, order and count all count.
func TestImagesFingerprint(t *testing.T) {
	lists := [][]Container{
		nil,
		{{Image: "ghcr.io/hanzoai/iam:v1"}},
		{{Image: "ghcr.io/hanzoai/iam:v2"}},
		{{Image: "ghcr.io/hanzoai/iam:v1"}, {Image: "redis:7"}},
		{{Image: "redis:7"}, {Image: "ghcr.io/hanzoai/iam:v1"}},
		{{Image: "ghcr.io/hanzoai/iam:v1"}, {Image: ""}},
		{{Image: "ghcr.io/hanzoai/iam:v1redis:7"}},
	}
	for i, x := range lists {
		for j, y := range lists {
			a := &NodeInfo{Obj: &Object{Kind: KindPod, Spec: &PodSpec{Containers: x}}}
			b := &NodeInfo{Obj: &Object{Kind: KindDeployment, Spec: &WorkloadSpec{Containers: slices.Clone(y)}}}
			if got := imagesSum(a) == imagesSum(b); got != (i == j) {
				t.Errorf("images %v and %v: fingerprints equal %v", x, y, got)
			}
		}
	}
}

// sameShape is what shapeOf fingerprints, compared field by field: the
// oracle of TestShapeFingerprint.
func sameShape(a, b *Object) bool {
	if a.UID != b.UID || !sameOwners(a.Owners, b.Owners) {
		return false
	}
	switch a.Kind {
	case KindPod:
		return slices.Equal(a.Labels, b.Labels)
	case KindDeployment:
		return sameSelector(deploymentSelector(a), deploymentSelector(b))
	case KindMiddleware, KindIngressRoute, KindCDApplication, KindAppProject:
		return false
	}
	return true
}

func sameSelector(a, b Selector) bool {
	return a.Invalid == b.Invalid && slices.Equal(a.MatchLabels, b.MatchLabels) &&
		slices.EqualFunc(a.Expressions, b.Expressions, func(x, y Requirement) bool {
			return x.Key == y.Key && x.Operator == y.Operator && slices.Equal(x.Values, y.Values)
		})
}
