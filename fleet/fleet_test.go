package fleet_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

var semver = regexp.MustCompile(`^v\d+\.\d+\.\d+$`)
var dns1123 = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func encodeAll(t *testing.T, apps []fleet.App) []byte {
	t.Helper()
	var buf bytes.Buffer
	for _, u := range fleet.RenderAll(apps) {
		b, err := json.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(b)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

func TestGenerateIsDeterministic(t *testing.T) {
	a, b := encodeAll(t, fleet.Generate(7, 30)), encodeAll(t, fleet.Generate(7, 30))
	if !bytes.Equal(a, b) {
		t.Fatal("two renders of seed 7 differ")
	}
	if c := encodeAll(t, fleet.Generate(8, 30)); bytes.Equal(a, c) {
		t.Fatal("seeds 7 and 8 render the same fleet")
	}
}

func TestGenerateShape(t *testing.T) {
	for _, n := range []int{6, 30, 40, 1000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			apps := fleet.Generate(1, n)
			kinds := map[fleet.Kind]int{}
			seen := map[string]bool{}
			namespaces := map[string]bool{}
			for _, a := range apps {
				kinds[a.Kind]++
				key := a.Kind.String() + "/" + a.Namespace + "/" + a.Name
				if seen[key] {
					t.Errorf("%s generated twice", key)
				}
				seen[key] = true
				namespaces[a.Namespace] = true
				if !dns1123.MatchString(a.Name) || len(a.Name) > 40 {
					t.Errorf("%s: name is not a short DNS-1123 label", key)
				}
				if a.Kind != fleet.KindApp {
					continue
				}
				if !semver.MatchString(a.Tag) {
					t.Errorf("%s: tag %q is not clean semver", key, a.Tag)
				}
				if len(a.Releases) < 2 || a.Releases[len(a.Releases)-1].Tag != a.Tag {
					t.Errorf("%s: releases %v: want at least two, the last one the declared tag", key, a.Releases)
				}
				for i := 1; i < len(a.Releases); i++ {
					if !a.Releases[i].At.After(a.Releases[i-1].At) {
						t.Errorf("%s: releases out of order: %v", key, a.Releases)
					}
				}
				if a.Replicas < 0 || a.Replicas > 3 {
					t.Errorf("%s: %d replicas", key, a.Replicas)
				}
				if strings.HasPrefix(a.Namespace, "tenant-") != (a.Org != "") || (a.Org != "" && a.Namespace != "tenant-"+a.Org) {
					t.Errorf("%s: org %q does not match its namespace", key, a.Org)
				}
			}
			if kinds[fleet.KindApp] != n || kinds[fleet.KindSite] != 1 || kinds[fleet.KindCD] != 1 || kinds[fleet.KindProject] != 1 {
				t.Fatalf("kinds %v: want %d Apps and one of each extra", kinds, n)
			}
			want := 4
			if n >= 100 {
				want += n / 100
			}
			if n < 6 || (n >= 30 && len(namespaces) != want) {
				t.Errorf("%d namespaces %v, want %d", len(namespaces), namespaces, want)
			}
		})
	}
}

// fold decodes every rendered object and applies it to a fresh store.
func fold(t *testing.T, apps []fleet.App) *projection.Snapshot {
	t.Helper()
	store := projection.NewStore(projection.DefaultConfig())
	var batch []projection.Change
	for _, u := range fleet.RenderAll(apps) {
		o, err := projection.Decode(u.Object)
		if err != nil {
			t.Fatalf("decode %s %s/%s: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
		batch = append(batch, projection.Change{Op: projection.Upsert, Object: o})
	}
	if _, err := store.Apply(batch...); err != nil {
		t.Fatal(err)
	}
	return store.Snapshot()
}

func TestRenderedFleetProjection(t *testing.T) {
	const n = 30
	apps := fleet.Generate(42, n)
	snap := fold(t, apps)
	if snap.Len() != n+1 {
		t.Fatalf("%d rows, want %d Apps and the site", snap.Len(), n+1)
	}
	if cd := snap.CDApplications(); len(cd) != 1 || cd[0].Name != fleet.CDName || cd[0].Sync != projection.SyncSynced {
		t.Fatalf("CD Applications %v: want %s, Synced", cd, fleet.CDName)
	}
	if !slices.ContainsFunc(snap.Projects(), func(p projection.Project) bool { return p.Name == "platform" }) {
		t.Fatalf("projects %v: want platform", snap.Projects())
	}
	site := snap.Get(fleet.NamespaceAcme, fleet.SiteName)
	if site == nil || site.Row != projection.RowSite || site.Health.Status != projection.HealthHealthy ||
		!slices.Equal(site.Endpoints, []string{"https://" + fleet.SiteHost}) {
		t.Fatalf("site %+v: want a Healthy site row routed at %s", site, fleet.SiteHost)
	}

	for _, a := range apps {
		if a.Kind != fleet.KindApp {
			continue
		}
		row := snap.Get(a.Namespace, a.Name)
		if row == nil {
			t.Errorf("%s/%s: no row", a.Namespace, a.Name)
			continue
		}
		key := a.Namespace + "/" + a.Name
		if row.Sync != projection.SyncSynced || row.Declared != a.Tag || row.Running != a.Tag {
			t.Errorf("%s: sync %s declared %s running %s, want Synced on %s", key, row.Sync, row.Declared, row.Running, a.Tag)
		}
		if row.Org != a.Org || row.Project != a.Project {
			t.Errorf("%s: org %q project %q, want %q %q", key, row.Org, row.Project, a.Org, a.Project)
		}
		want := projection.HealthHealthy
		switch {
		case a.Replicas == 0:
			want = projection.HealthSuspended
		case a.Fault != fleet.FaultNone:
			want = projection.HealthDegraded
		}
		if row.Health.Status != want {
			t.Errorf("%s: health %s %q, want %s", key, row.Health.Status, row.Health.Message, want)
		}
		switch a.Fault {
		case fleet.FaultCrashLoop:
			if !strings.Contains(row.Health.Message, "CrashLoopBackOff") {
				t.Errorf("%s: health message %q does not name the crash loop", key, row.Health.Message)
			}
		case fleet.FaultImagePull:
			if !strings.Contains(row.Health.Message, "ImagePullBackOff") && !strings.Contains(row.Health.Message, "ProgressDeadlineExceeded") {
				t.Errorf("%s: health message %q does not name the stuck rollout", key, row.Health.Message)
			}
		}
		if len(row.History) != len(a.Releases) {
			t.Errorf("%s: %d history entries, want %d", key, len(row.History), len(a.Releases))
		}
		counts := map[projection.Kind]int{}
		for _, node := range row.Tree {
			counts[node.Obj.Kind]++
		}
		pods := int(a.Replicas)
		if a.Fault == fleet.FaultImagePull {
			pods++
		}
		wantCounts := map[projection.Kind]int{projection.KindApp: 1, projection.KindDeployment: 1, projection.KindService: 1,
			projection.KindConfigMap: 1, projection.KindReplicaSet: len(a.Releases)}
		if pods > 0 {
			wantCounts[projection.KindPod] = pods
		}
		if len(a.Hosts) > 0 {
			wantCounts[projection.KindIngress] = 1
		}
		if a.Autoscale != nil && a.Replicas > 0 {
			wantCounts[projection.KindHPA] = 1
		}
		if a.PDB {
			wantCounts[projection.KindPDB] = 1
		}
		if fmt.Sprint(counts) != fmt.Sprint(wantCounts) {
			t.Errorf("%s: tree %v, want %v", key, counts, wantCounts)
		}
	}

	// Tenancy: acme's members see acme's Apps and its site, nothing else.
	var acme []string
	for _, a := range snap.Tenant(projection.TenantPrefix, "acme") {
		acme = append(acme, a.Name)
	}
	var wantAcme []string
	for _, a := range apps {
		if a.Org == "acme" && (a.Kind == fleet.KindApp || a.Kind == fleet.KindSite) {
			wantAcme = append(wantAcme, a.Name)
		}
	}
	slices.Sort(wantAcme)
	if !slices.Equal(acme, wantAcme) {
		t.Fatalf("acme sees %v, want %v", acme, wantAcme)
	}
}

// Every rendered object is something deployd reads; none is a Secret.
func TestRenderedKinds(t *testing.T) {
	for _, u := range fleet.RenderAll(fleet.Generate(3, 40)) {
		if k := projection.LookupKindByAPIVersion(u.GetAPIVersion(), u.GetKind()); !k.InRegistry() {
			t.Errorf("%s %s is not a registry kind", u.GetAPIVersion(), u.GetKind())
		}
		for _, ref := range u.GetOwnerReferences() {
			if ref.UID != "" && string(ref.UID) != fleet.UID(u.GetNamespace(), ref.Kind, ref.Name) {
				t.Errorf("%s %s: owner uid %s is not derived from the owner", u.GetKind(), u.GetName(), ref.UID)
			}
		}
	}
}
