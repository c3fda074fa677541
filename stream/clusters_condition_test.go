package stream_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// condView is what a client holds: each App's Application as last sent.
type condView map[string]string

// take applies events to the view and fails on one that repeats what the
// view holds (a duplicate); it returns the events' keys.
func (v condView) take(t *testing.T, where string, fs []streamtest.Frame) []string {
	t.Helper()
	var keys []string
	for _, f := range fs {
		typ, k, app := frameEvent(t, f)
		if v[k] == string(app) {
			t.Errorf("%s: %s %s repeats what the client holds", where, typ, k)
		}
		v[k] = string(app)
		keys = append(keys, k)
	}
	return keys
}

// staging counts the view's Apps of staging with the condition of their
// cluster not answering, and without.
func (v condView) staging() (down, up int) {
	for k, app := range v {
		if !strings.Contains(k, ".staging/") {
			continue
		}
		if strings.Contains(app, `"type":"ComparisonError"`) {
			down++
		} else {
			up++
		}
	}
	return down, up
}

// TestTwoClustersConditionAcrossReplicas: staging's API server stops and
// starts again, and each replica sees it at its own moment, so the rows'
// condition (staging has not answered since …) is each replica's own
// observation, which moves no resourceVersion. A position marks it
// ("staging=<rv>~<since>"), so a client moving between replicas is sent
// the condition's start and end once each, never again what it holds,
// and never keeps a condition the replica it is on no longer sees: from a
// replica whose ring holds the change, and from one that never saw the
// cluster fail (its history path sends the rows again).
func TestTwoClustersConditionAcrossReplicas(t *testing.T) {
	var c cluster2
	initial := []projection.Change{
		c.app(0, "hanzo", "iam", "", "v1"),
		c.app(1, "hanzo", "iam", "", "v1"),
		c.app(1, "tenant-acme", "web", "acme", "v1"),
	}
	a, b := newReplica(t, initial), newReplica(t, initial)
	// never saw staging fail; its History is asked nothing (no cluster is
	// newer there), but without one a resume it cannot replay is a reset.
	steady := newReplicaWith(t, initial, stream.Options{Batch: -1, History: &homeHistory{}}, nil)
	names := a.store.Config().ClusterNames()
	view := condView{}
	fs, at0 := a.read(t, "all", "", 3)
	view.take(t, "burst on a", fs)

	down := func(r *replica, since int64) {
		r.apply(t, projection.Change{Op: projection.Unreachable, Cluster: 1, Since: since})
	}
	down(a, 1764680000)
	down(b, 1764680003)

	// On a: staging's two rows with the condition as a saw it.
	fs, at1 := a.read(t, "all", at0, 2)
	view.take(t, "a, staging down", fs)
	if d, _ := view.staging(); d != 2 || !strings.HasSuffix(at1, "~1764680000") {
		t.Fatalf("after staging failed on a: %d rows with the condition, id %s", d, at1)
	}
	// On b, from a's id: b marks it otherwise (its own moment), so the
	// rows come again with b's; none repeats.
	fs, at2 := b.read(t, "all", at1, 2)
	view.take(t, "b from a's id", fs)
	if !strings.HasSuffix(at2, "~1764680003") {
		t.Errorf("b's id %s: want b's mark", at2)
	}
	// Back on a with b's id, and a sees staging answer: the rows come
	// once, without the condition.
	down(a, 0)
	fs, at3 := a.read(t, "all", at2, 2)
	view.take(t, "a, staging back", fs)
	if d, u := view.staging(); d != 0 || u != 2 || strings.Contains(at3, "~") {
		t.Fatalf("after staging answered on a: %d rows with the condition, %d without, id %s", d, u, at3)
	}
	// On b, which still sees staging down, from a's id: b's rows with its
	// condition (the client is shown what the replica it is on sees).
	fs, at4 := b.read(t, "all", at3, 2)
	view.take(t, "b, still down, from a's id", fs)
	held := condView{} // a second client's view: the first's now
	for k, v := range view {
		held[k] = v
	}
	// b sees staging answer; the client resumes on b from its id and is
	// sent the end once; then on a from b's id, which holds what a holds:
	// nothing is due.
	down(b, 0)
	fs, at5 := b.read(t, "all", at4, 2)
	view.take(t, "b, staging back", fs)
	if d, _ := view.staging(); d != 0 || strings.Contains(at5, "~") {
		t.Fatalf("after staging answered on b: %d rows with the condition, id %s", d, at5)
	}
	if fs, _ := a.read(t, "all", at5, 0); len(fs) != 0 {
		t.Errorf("on a from b's id: %d events, want none", len(fs))
	}

	// A client that last saw b with staging down (at4) resumes on a,
	// which has seen it answer: the end comes (the client would otherwise
	// keep the condition until each row changed).
	fs, _ = a.read(t, "all", at4, 2)
	held.take(t, "a from b's id while b saw staging down", fs)
	if d, u := held.staging(); d != 0 || u != 2 {
		t.Errorf("resumed on a from %s: %d rows with the condition, %d without; want the end of it", at4, d, u)
	}
	// And on a replica that never saw staging fail.
	fs, at6 := steady.read(t, "all", at4, 2)
	if k := condView(map[string]string{}).take(t, "steady", fs); len(k) != 2 {
		t.Errorf("resumed on the steady replica from %s: %v", at4, k)
	}
	if p, err := projection.ParsePosition(at6, names); err != nil || p.Down(1) != 0 {
		t.Errorf("the steady replica's id %s (%v): want staging unmarked", at6, err)
	}
	for _, r := range []*replica{a, b, steady} {
		if s := r.hub.Stats(); s.Resets != 0 {
			t.Errorf("%d resets", s.Resets)
		}
	}
	if s := steady.hub.Stats(); s.HistoryResumes != 1 {
		t.Errorf("the steady replica caught the client up from its history %d times, want once", s.HistoryResumes)
	}
}

// TestTwoClustersConditionOfALateCluster: a replica that started while
// staging did not answer (it holds nothing of it, and marks it failing)
// resumes a client that holds staging's rows without the condition. When
// staging answers, the replica folds its rows (still marked failing: it
// has not seen the cluster answer yet), then a change of in-cluster, then
// the end of the condition: the client is sent in-cluster's change alone,
// and its ids mark staging as it holds it (not as the replica does), so
// nothing it holds comes again, here or on another replica.
func TestTwoClustersConditionOfALateCluster(t *testing.T) {
	var c cluster2
	home := []projection.Change{c.app(0, "hanzo", "iam", "", "v1")}
	staging := []projection.Change{c.app(1, "hanzo", "iam", "", "v1"), c.app(1, "tenant-acme", "web", "acme", "v1")}
	a := newReplica(t, slices.Concat(home, staging))
	failing := projection.Change{Op: projection.Unreachable, Cluster: 1, Since: 1764680000}
	b := newReplicaWith(t, append(slices.Clone(home), failing), stream.Options{Batch: -1},
		func(p projection.Position) projection.Position { return p.With(1, 0) })
	names := a.store.Config().ClusterNames()
	_, at0 := a.read(t, "all", "", 3)

	change := c.app(0, "hanzo", "iam", "", "v2")
	a.apply(t, change)
	done := whenJoined(b, func() {
		b.apply(t, staging...)
		b.apply(t, change)
		b.apply(t, projection.Change{Op: projection.Unreachable, Cluster: 1})
	})
	got, at1 := b.read(t, "all", at0, 1)
	<-done
	if k := eventKeys(t, got); !k["MODIFIED hanzo/iam"] {
		t.Errorf("on b from %s: %v, want in-cluster's change alone", at0, k)
	}
	if p, err := projection.ParsePosition(at1, names); err != nil || p.Down(1) != 0 {
		t.Errorf("b's id %s (%v): staging marked failing, which the client does not hold", at1, err)
	}
	if fs, _ := a.read(t, "all", at1, 0); len(fs) != 0 {
		t.Errorf("on a from b's id: %d events, want none", len(fs))
	}
}
