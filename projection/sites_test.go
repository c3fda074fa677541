package projection

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// TestSiteNames: a site row is named after its root's last segment, else
// after its Middleware without "-static"; when an App holds that name the
// row keeps the Middleware's. Every order of arrival gives the same rows,
// and so does an App arriving or leaving after the sites.
func TestSiteNames(t *testing.T) {
	objs := loadObjects(t, "testdata/sites.yaml")
	s := NewStore(DefaultConfig())
	if _, err := s.Apply(upserts(objs)...); err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot()
	var names []string
	var apps []json.RawMessage
	for a := range snap.Apps() {
		names = append(names, a.Row.String()+" "+a.Name)
		apps = append(apps, a.ApplicationJSON())
	}
	want := []string{"site docs", "site status", "app web", "site web-static"}
	if !slices.Equal(names, want) {
		t.Fatalf("rows %q, want %q", names, want)
	}
	goldenJSON(t, "sites.applications.golden.json", apps)
	canonical := snap.Canonical()

	// One at a time, in every rotation and reversed: the same snapshot.
	for rot := range objs {
		for _, rev := range []bool{false, true} {
			order := append(slices.Clone(objs[rot:]), objs[:rot]...)
			if rev {
				slices.Reverse(order)
			}
			s := NewStore(DefaultConfig())
			for _, o := range order {
				if _, err := s.Apply(Change{Op: Upsert, Object: o}); err != nil {
					t.Fatal(err)
				}
			}
			if err := checkInvariants(s); err != nil {
				t.Fatal(err)
			}
			if got := s.Snapshot().Canonical(); !bytes.Equal(got, canonical) {
				t.Fatalf("rotation %d reversed %v:\n%s", rot, rev, lineDiff(string(canonical), string(got)))
			}
		}
	}

	// The App leaves: its name is free, the site takes it; it comes back:
	// the site gives it up again.
	var app *Object
	for _, o := range objs {
		if o.Kind == KindApp {
			app = o
		}
	}
	if _, err := s.Apply(Change{Op: Delete, Object: app}); err != nil {
		t.Fatal(err)
	}
	if a := s.Snapshot().Get("hanzo", "web"); a == nil || a.Row != RowSite {
		t.Fatalf("without the App, hanzo/web is %v, want the site", a)
	}
	if a := s.Snapshot().Get("hanzo", "web-static"); a != nil {
		t.Fatalf("without the App, the site is still also named web-static")
	}
	if _, err := s.Apply(Change{Op: Upsert, Object: app}); err != nil {
		t.Fatal(err)
	}
	if err := checkInvariants(s); err != nil {
		t.Fatal(err)
	}
	if got := s.Snapshot().Canonical(); !bytes.Equal(got, canonical) {
		t.Fatalf("after the App came back:\n%s", lineDiff(string(canonical), string(got)))
	}
}

// TestPreferredSiteName: the name rule alone.
func TestPreferredSiteName(t *testing.T) {
	for _, c := range []struct{ mw, root, want string }{
		{"docs-static", "s3://cdn/docs", "docs"},
		{"docs-static", "s3://cdn/docs/", "docs"},
		{"x", "/sites/acme/docs", "docs"},
		{"x", "docs", "docs"},
		{"docs-static", "s3://cdn/Docs", "docs"},
		{"docs-static", "s3://", "docs"},
		{"docs-static", "", "docs"},
		{"docs", "s3://cdn/a_b", "docs"},
		{"-static", "s3://", "-static"},
	} {
		o := &Object{Kind: KindMiddleware, Name: c.mw, Spec: &MiddlewareSpec{StaticRoot: c.root}}
		if got := preferredSiteName(o); got != c.want {
			t.Errorf("preferredSiteName(%s, %q) = %q, want %q", c.mw, c.root, got, c.want)
		}
	}
}
