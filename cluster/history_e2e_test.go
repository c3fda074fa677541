package cluster_test

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

// TestRootsAt: the rows' own objects as the API server held them at a
// past position (what a replica that started later needs to resume a
// stream from it): an App deleted since is there, one created since is
// not, each at the resourceVersion it had then. The snapshot's position
// moves with the cluster's writes, deletions included.
func TestRootsAt(t *testing.T) {
	c := clustertest.Start(t)
	rs := startReadSide(t, c.Config)
	c.ApplyFleet(t, clustertest.Manifests(t, fleetFixture))
	rs.WaitConverged(t, c.Dynamic(), 30*time.Second)
	then := rs.Store.Snapshot()
	if then.Position.First() == 0 || rs.Watcher.ListedAt() == 0 {
		t.Fatalf("position %d, listed at %d; want both set", then.Position.First(), rs.Watcher.ListedAt())
	}
	var want []string
	for a := range then.Apps() {
		if a.Row == projection.RowApp {
			want = append(want, a.Namespace+"/"+a.Name)
		}
	}
	if !slices.Contains(want, "tenant-acme/worker") {
		t.Fatalf("the fixture has no tenant-acme/worker: %v", want)
	}

	if err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("tenant-acme").Delete(t.Context(), "worker", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.ApplyFleet(t, []*unstructured.Unstructured{clustertest.Object(t, `
apiVersion: hanzo.ai/v1
kind: App
metadata: {name: billing, namespace: hanzo}
spec: {image: {repository: ghcr.io/hanzoai/billing, tag: v0.1.0}}
`)})
	rs.WaitConverged(t, c.Dynamic(), 30*time.Second)
	now := rs.Store.Snapshot()
	if now.Position.First() <= then.Position.First() {
		t.Fatalf("position %d after the writes, want past %d", now.Position.First(), then.Position.First())
	}

	apps := func(pos uint64) []string {
		t.Helper()
		objs, err := rs.Watcher.RootsAt(t.Context(), pos)
		if err != nil {
			t.Fatalf("RootsAt(%d): %v", pos, err)
		}
		var out []string
		for _, o := range objs {
			if rv := projection.ParseResourceVersion(o.ResourceVersion); rv == 0 || rv > pos {
				t.Errorf("RootsAt(%d): %s %s/%s at resourceVersion %q", pos, o.Kind, o.Namespace, o.Name, o.ResourceVersion)
			}
			if o.Kind == projection.KindApp {
				out = append(out, o.Namespace+"/"+o.Name)
			}
		}
		slices.Sort(out)
		return out
	}
	slices.Sort(want)
	if got := apps(then.Position.First()); !slices.Equal(got, want) {
		t.Errorf("Apps at %d:\n got %v\nwant %v", then.Position.First(), got, want)
	}
	got := apps(now.Position.First())
	if slices.Contains(got, "tenant-acme/worker") || !slices.Contains(got, "hanzo/billing") {
		t.Errorf("Apps at %d: %v; want billing and not worker", now.Position.First(), got)
	}
}
