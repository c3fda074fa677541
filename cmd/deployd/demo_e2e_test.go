package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/hanzoai/deploy/demo/idp"
	"github.com/hanzoai/deploy/fleet"
	"github.com/hanzoai/deploy/projection"
)

// runningDemo starts the demo on a free loopback port with the simulator
// stepped by the test only (unless an option sets a pace).
func runningDemo(t *testing.T, options ...func(*demoOptions)) *demoServer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := demoOptions{Listen: "127.0.0.1:0", MetricsListen: "127.0.0.1:0", Seed: 1, Apps: 30, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for _, f := range options {
		f(&o)
	}
	d, err := startDemo(ctx, o)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("demo: %v", err)
		}
		d.close()
	})
	c := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.Get(d.URL + "/v1/deploy/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the demo was not ready in 20s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// signIn goes through the real redirect flow as a demo user: login, the
// identity provider's chooser page, the pick, the callback, the cookie.
func signIn(t *testing.T, d *demoServer, u idp.User) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(u string) *http.Response {
		t.Helper()
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	resp := get(d.URL + "/v1/deploy/login?returnTo=/")
	authorize := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(authorize, d.env.IdP.Issuer()) {
		t.Fatalf("login: %d to %q", resp.StatusCode, authorize)
	}
	// The chooser page.
	page, err := c.Get(authorize)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != http.StatusOK || !strings.Contains(string(body), "DEMO IDENTITIES") || !strings.Contains(string(body), u.Subject) {
		t.Fatalf("chooser page: %d\n%s", page.StatusCode, body)
	}
	next := authorize + "&" + idp.UserParam + "=" + url.QueryEscape(u.Subject)
	for range 5 {
		resp = get(next)
		if resp.StatusCode != http.StatusFound {
			break
		}
		next = resp.Request.URL.ResolveReference(mustURL(t, resp.Header.Get("Location"))).String()
		if strings.HasPrefix(next, d.URL+"/") && !strings.Contains(next, "/v1/deploy/callback") {
			return c
		}
	}
	t.Fatalf("sign-in as %s ended at %d %s", u.Username, resp.StatusCode, next)
	return nil
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func demoUser(t *testing.T, d *demoServer, name string) idp.User {
	t.Helper()
	for _, u := range d.env.IdP.Users() {
		if u.Username == name {
			return u
		}
	}
	t.Fatalf("no demo user %s", name)
	return idp.User{}
}

// listNames reads the list with a session client.
func listNames(t *testing.T, d *demoServer, c *http.Client) ([]string, string) {
	t.Helper()
	resp, err := c.Get(d.URL + "/v1/deploy/applications?fields=metadata.resourceVersion,items.metadata.name,items.metadata.namespace")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Metadata struct{ ResourceVersion string }
		Items    []struct {
			Metadata struct{ Name, Namespace string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("list: %d %v", resp.StatusCode, err)
	}
	var out []string
	for _, it := range list.Items {
		out = append(out, it.Metadata.Namespace+"/"+it.Metadata.Name)
	}
	sort.Strings(out)
	return out, list.Metadata.ResourceVersion
}

// TestDemoSignInScopes (check 1): each demo user signs in through the real
// redirect flow and lists exactly its scope.
func TestDemoSignInScopes(t *testing.T) {
	d := runningDemo(t)
	want := map[string][]string{}
	for _, a := range fleet.Generate(1, 30) {
		if a.Kind == fleet.KindProject {
			continue
		}
		key := a.Namespace + "/" + a.Name
		want["ada"] = append(want["ada"], key)
		if a.Kind == fleet.KindCD {
			continue
		}
		if a.Namespace == "tenant-acme" && a.Org == "acme" {
			want["ari"] = append(want["ari"], key)
		}
		if a.Namespace == "tenant-globex" && a.Org == "globex" {
			want["gil"] = append(want["gil"], key)
		}
	}
	for _, name := range []string{"ada", "ari", "gil"} {
		sort.Strings(want[name])
		c := signIn(t, d, demoUser(t, d, name))
		got, _ := listNames(t, d, c)
		if !slices.Equal(got, want[name]) {
			t.Errorf("%s lists %v\nwant %v", name, got, want[name])
		}
	}
	if len(want["ari"]) == 0 || len(want["gil"]) == 0 || len(want["ada"]) <= len(want["ari"])+len(want["gil"]) {
		t.Fatalf("the scopes are degenerate: %d %d %d", len(want["ada"]), len(want["ari"]), len(want["gil"]))
	}
}

// stepUntil steps the simulator until cond holds, at most n steps.
// what explains the failure, when given.
func stepUntil(t *testing.T, d *demoServer, n int, what string, cond func() bool, explain ...func() string) {
	t.Helper()
	for i := 0; i < n; i++ {
		if err := d.env.Sim.Step(t.Context()); err != nil {
			t.Fatal(err)
		}
		// A step's writes reach the stream through the watch: give it the
		// time to, bounded, before judging.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			if cond() {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for _, f := range explain {
		what += "\n" + f()
	}
	t.Fatalf("%s: not after %d simulator steps", what, n)
}

// TestDemoRolloutAndWrites (checks 2 and 3): a rollout shows in the stream
// as Progressing, then Healthy/Synced, within a bounded number of simulator
// steps; as the SuperAdmin a sync, a rollback and a paas deploy each show.
func TestDemoRolloutAndWrites(t *testing.T) {
	d := runningDemo(t)
	ada := signIn(t, d, demoUser(t, d, "ada"))
	_, rv := listNames(t, d, ada)
	streamClient := &http.Client{Jar: ada.Jar}
	f := follow(t, streamClient, d.URL+"/v1/deploy/stream/applications?resourceVersion="+rv, "")

	// A new release of globex's api is declared (as a commit would).
	app, _, ok := d.env.Sim.App("tenant-globex", "api")
	if !ok {
		t.Fatal("no tenant-globex/api in the demo")
	}
	patch := []byte(`{"spec":{"image":{"tag":"v9.0.0"}}}`)
	if _, err := d.env.Cluster.Dynamic().Resource(projection.KindApp.GVR()).Namespace("tenant-globex").
		Patch(t.Context(), "api", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	stepUntil(t, d, 15, "api rolled out to v9.0.0", func() bool {
		ev := f.of("tenant-globex", "api")
		return len(ev) > 0 && ev[len(ev)-1].Health == "Healthy" && ev[len(ev)-1].Sync == "Synced" && ev[len(ev)-1].Revision == "v9.0.0"
	})
	var seq []string
	for _, e := range f.of("tenant-globex", "api") {
		s := e.Health + "/" + e.Sync
		if len(seq) == 0 || seq[len(seq)-1] != s {
			seq = append(seq, s)
		}
	}
	if !slices.ContainsFunc(seq, func(s string) bool { return strings.HasPrefix(s, "Progressing/") }) {
		t.Fatalf("the rollout of api from %s showed %v, without Progressing", app.Tag, seq)
	}
	t.Logf("api rollout as streamed: %v", seq)

	post := func(path, body string) int {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, d.URL+path, strings.NewReader(body))
		req.Header.Set("Origin", d.URL)
		resp, err := ada.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 300 {
			b, _ := io.ReadAll(resp.Body)
			t.Logf("POST %s: %d %s", path, resp.StatusCode, b)
		}
		return resp.StatusCode
	}
	// Sync: the stream shows the operation.
	if code := post("/v1/deploy/applications/api/sync?appNamespace=tenant-globex", "{}"); code != http.StatusOK {
		t.Fatalf("sync: %d", code)
	}
	stepUntil(t, d, 5, "the sync's operation in the stream", func() bool {
		return slices.ContainsFunc(f.of("tenant-globex", "api"), func(e appEvent) bool { return e.Operation != "" })
	})
	// Rollback to the release before: the stream follows to it.
	if code := post("/v1/deploy/applications/api/rollback?appNamespace=tenant-globex", `{"tag":"`+app.Tag+`"}`); code != http.StatusOK {
		t.Fatalf("rollback to %s: %d", app.Tag, code)
	}
	stepUntil(t, d, 15, "api rolled back to "+app.Tag, func() bool {
		ev := f.of("tenant-globex", "api")
		last := ev[len(ev)-1]
		return last.Revision == app.Tag && last.Sync == "Synced" && last.Health == "Healthy"
	})
	// A rolling restart: a new ReplicaSet, so a new history entry, same tag.
	before := f.of("tenant-globex", "api")
	hist := before[len(before)-1].History
	if code := post("/v1/paas/apps/api/deploy?env=main&namespace=tenant-globex", ""); code != http.StatusAccepted {
		t.Fatalf("deploy: %d", code)
	}
	stepUntil(t, d, 15, "api restarted", func() bool {
		ev := f.of("tenant-globex", "api")
		last := ev[len(ev)-1]
		return last.History == hist+1 && last.Revision == app.Tag && last.Health == "Healthy"
	})
}

// TestDemoMetrics: the demo serves /metrics on its own loopback listener,
// one argocd_app_info series per row of the simulated fleet, and refuses a metrics
// address off loopback.
func TestDemoMetrics(t *testing.T) {
	d := runningDemo(t)
	if d.MetricsURL == "" || strings.HasPrefix(d.MetricsURL, d.URL) {
		t.Fatalf("metrics URL %q, want its own listener beside %s", d.MetricsURL, d.URL)
	}
	resp, err := http.Get(d.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	snap := d.plane.store.Snapshot()
	want := snap.Len() + len(snap.CDApplications())
	if n := strings.Count(string(b), "\nargocd_app_info{"); resp.StatusCode != http.StatusOK || n != want || want < 30 {
		t.Fatalf("GET %s: %d with %d argocd_app_info series, want 200 and %d (the 30 Apps and the CD Applications)", d.MetricsURL, resp.StatusCode, n, want)
	}
	_, err = startDemo(t.Context(), demoOptions{Listen: "127.0.0.1:0", MetricsListen: "0.0.0.0:0", Apps: 30})
	if err == nil || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Errorf("a metrics address off loopback: got %v, want a refusal naming --metrics-listen", err)
	}
}

// TestDemoLoopbackHostsOnly: the demo's page and API, and its identity
// provider, answer only a loopback Host: a page of another site that a
// DNS rebinding points at them names its own, and is refused with 421
// and a message; 127.0.0.1 and localhost are served.
func TestDemoLoopbackHostsOnly(t *testing.T) {
	d := runningDemo(t)
	for _, base := range []string{d.URL, d.env.IdP.Issuer()} {
		for host, want := range map[string]int{"evil.example": http.StatusMisdirectedRequest, "evil.example:8080": http.StatusMisdirectedRequest, "127.0.0.1.evil.example": http.StatusMisdirectedRequest} {
			req, _ := http.NewRequest(http.MethodGet, base+"/.well-known/openid-configuration", nil)
			if base == d.URL {
				req, _ = http.NewRequest(http.MethodGet, base+"/v1/deploy/health", nil)
			}
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || !strings.Contains(string(b), "only loopback hosts") {
				t.Errorf("%s with Host %s: %d %s", base, host, resp.StatusCode, b)
			}
		}
	}
	u, _ := url.Parse(d.URL)
	for _, host := range []string{u.Host, "localhost:" + u.Port()} {
		req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/deploy/health", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %s: %d", host, resp.StatusCode)
		}
	}
}
