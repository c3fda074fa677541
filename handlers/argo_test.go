package handlers

import (
	"bufio"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/hanzoai/deploy/projection"
)

// webResource is the query naming web's Deployment as Argo CD's UI sends it.
const webResource = "appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web&version=v1&kind=Deployment&group=apps"

// TestGatewayConventions: Argo CD's REST gateway repeats path parameters in
// the query; they are accepted when they agree with the path and a 400 when
// they contradict it. refresh is accepted; what Argo CD does not define
// stays a 400.
func TestGatewayConventions(t *testing.T) {
	env := newServerEnv(t)
	acme := env.token(t, userAlice, time.Hour)
	for _, c := range []struct {
		path string
		code int
		want string // in the error message
	}{
		{"/api/v1/applications/web?name=web&appNamespace=tenant-acme", 200, ""},
		{"/api/v1/applications/web?name=worker", 400, "contradicts the path"},
		{"/api/v1/applications/web?name=web&name=worker", 400, "contradicts the path"},
		{"/api/v1/applications/web?project=storefront", 200, ""},
		{"/api/v1/applications/web?project=default", 400, "belongs to project"},
		{"/api/v1/applications/web?appNamespace=tenant-globex", 404, "not found"},
		{"/api/v1/applications/web/syncwindows?name=web&appNamespace=tenant-acme", 200, ""},
		{"/api/v1/applications/web/syncwindows?name=api&appNamespace=tenant-acme", 400, "contradicts the path"},
		{"/api/v1/applications/web/resource-tree?applicationName=web&appNamespace=tenant-acme", 200, ""},
		{"/api/v1/applications/web/resource-tree?applicationName=api", 400, "contradicts the path"},
		{"/api/v1/applications/web/resource-tree?name=web", 200, ""},
		{"/api/v1/applications/web/revisions/v3.2.1/metadata?name=web&revision=v3.2.1&appNamespace=tenant-acme", 200, ""},
		{"/api/v1/applications/web/revisions/v3.2.1/metadata?revision=v3.2.0", 400, "contradicts the path"},
		{"/api/v1/applications/web/managed-resources?applicationName=web&appNamespace=tenant-acme", 200, ""},
		{"/api/v1/applications/web/managed-resources?applicationName=worker", 400, "contradicts the path"},
		{"/api/v1/applications/web/resource?name=web&" + webResource, 200, ""},
		{"/api/v1/applications/web/resource?name=web-55d6c7-x2x2x&appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web-55d6c7-x2x2x&version=v1&kind=Pod&group=", 200, ""},
		{"/api/v1/applications/web/resource?name=worker&" + webResource, 400, "names neither"},
		{"/api/v1/applications/web/resource/actions?name=web&" + webResource, 200, ""},
		{"/api/v1/applications/web/resource/links?name=web&" + webResource, 200, ""},
		{"/api/v1/applications/web/events?name=web&appNamespace=tenant-acme", 200, ""},
		{"/api/v1/applications/web/events?name=api", 400, "contradicts the path"},
		{"/api/v1/applications/web/links?name=web&namespace=tenant-acme", 200, ""},
		{"/api/v1/applications/web/links?name=api", 400, "contradicts the path"},
		{"/api/v1/applications/web/manifests?name=web&appNamespace=tenant-acme&revision=", 200, ""},
		{"/api/v1/applications/web/manifests?revision=v1.0.0", 400, "declared revision"},
		{"/api/v1/applications/web/logs?name=web&appNamespace=tenant-acme&follow=false", 200, ""},
		{"/api/v1/applications/web/logs?name=api", 400, "contradicts the path"},
		{"/api/v1/clusters/https%3A%2F%2Fkubernetes.default.svc?id.type=url&id.value=https%3A%2F%2Fkubernetes.default.svc", 200, ""},
		{"/api/v1/clusters/https%3A%2F%2Fkubernetes.default.svc?id.value=https%3A%2F%2Fother", 400, "contradicts the path"},
		{"/api/v1/clusters/in-cluster?id.type=name", 200, ""},
		{"/api/v1/clusters/https%3A%2F%2Fother.example?id.type=url", 404, "not found"},
		{"/api/v1/clusters/in-cluster?id.type=uuid", 400, "id.type must be"},
		// refresh on GETs.
		{"/api/v1/applications?refresh=normal", 200, ""},
		{"/api/v1/applications/web?refresh=normal", 200, ""},
		{"/api/v1/applications/web?refresh=hard", 200, ""},
		{"/api/v1/applications/web/resource-tree?refresh=normal", 200, ""},
		{"/api/v1/applications/web?refresh=always", 400, "refresh must be"},
		// What Argo CD does not define stays a 400.
		{"/api/v1/applications/web?nmae=web", 400, "unknown query parameter"},
		{"/api/v1/applications/web/events?resourceKind=Pod", 400, "unknown query parameter"},
		{"/api/v1/projects?name=default", 400, "unknown query parameter"},
	} {
		r := env.get(t, c.path, acme)
		if r.code != c.code {
			t.Errorf("GET %s: got %d, want %d: %s", c.path, r.code, c.code, r.body)
			continue
		}
		if c.code >= 400 {
			if msg := errorMessage(t, r); !strings.Contains(msg, c.want) {
				t.Errorf("GET %s: message %q, want it to say %q", c.path, msg, c.want)
			}
		}
	}
}

// TestGetClusterOfSeveral: with several clusters, GET clusters/{id} finds
// each by its server URL or its name (the stock UI asks for an App's
// destination cluster by its server); a cluster deployd does not read is a
// 404 naming those it does.
func TestGetClusterOfSeveral(t *testing.T) {
	env := newServerEnvWith(t, func(d *Deps) {
		d.Clusters = func() []ClusterEntry {
			return []ClusterEntry{
				{Name: "in-cluster", Server: "https://kubernetes.default.svc", Status: ClusterStatus{Ready: true}},
				{Name: "staging", Server: "https://staging.example:6443", Status: ClusterStatus{Ready: true}},
			}
		}
	})
	acme := env.token(t, userAlice, time.Hour)
	for _, c := range []struct{ path, name string }{
		{"/api/v1/clusters/https%3A%2F%2Fkubernetes.default.svc?id.type=url", "in-cluster"},
		{"/api/v1/clusters/https%3A%2F%2Fstaging.example%3A6443?id.type=url", "staging"},
		{"/api/v1/clusters/staging?id.type=name_escaped", "staging"},
		{"/api/v1/clusters/in-cluster?id.type=name", "in-cluster"},
	} {
		r := env.get(t, c.path, acme)
		var cl struct{ Name, Server string }
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &cl) != nil || cl.Name != c.name {
			t.Errorf("GET %s: %d %.300s, want the cluster %s", c.path, r.code, r.body, c.name)
		}
	}
	r := env.get(t, "/api/v1/clusters/https%3A%2F%2Fother.example?id.type=url", acme)
	if msg := errorMessage(t, r); r.code != http.StatusNotFound || !strings.Contains(msg, `deployd reads the clusters "https://kubernetes.default.svc" (in-cluster), "https://staging.example:6443" (staging)`) {
		t.Errorf("GET a cluster deployd does not read: %d %q", r.code, msg)
	}
}

// TestFieldsOnEveryList: fields cuts every list to the paths asked for.
func TestFieldsOnEveryList(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	for _, c := range []struct{ path, want string }{
		{"/api/v1/applications?fields=items.metadata.name&name=web", `{"items":[{"metadata":{"name":"web"}}]}`},
		{"/api/v1/projects?fields=items.metadata.name", `{"items":[{"metadata":{"name":"default"}},{"metadata":{"name":"platform"}},{"metadata":{"name":"storefront"}}]}`},
		{"/api/v1/clusters?fields=items.name,items.server", `{"items":[{"name":"in-cluster","server":"https://kubernetes.default.svc"}]}`},
		{"/api/v1/applications/web/managed-resources?appNamespace=tenant-acme&fields=items.kind,items.name", `{"items":[{"kind":"App","name":"web"},{"kind":"Deployment","name":"web"}]}`},
		{"/api/v1/applications/web/events?appNamespace=tenant-acme&fields=items.reason", `{"items":[{"reason":"ScalingReplicaSet"},{"reason":"Pulled"}]}`},
		{"/v1/deploy/projects?fields=metadata.resourceVersion", `{"metadata":{"resourceVersion":"` + uintString(env.store.Snapshot().Position.First()) + `"}}`},
	} {
		r := env.get(t, c.path, root)
		if r.code != http.StatusOK || strings.TrimSpace(r.body) != c.want {
			t.Errorf("GET %s: %d %s\nwant %s", c.path, r.code, strings.TrimSpace(r.body), c.want)
		}
	}
	r := env.get(t, "/api/v1/projects?fields=spec", root)
	if r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), "fields start with items") {
		t.Errorf("a field outside the list: %d %s", r.code, r.body)
	}
}

// TestBothPrefixes: every read route of the Argo CD dialect answers the
// same at /v1/deploy and /api/v1.
func TestBothPrefixes(t *testing.T) {
	env := newServerEnv(t)
	acme := env.token(t, userAlice, time.Hour)
	for _, p := range []string{
		"/applications", "/applications/web", "/applications/web/resource-tree", "/applications/web/syncwindows",
		"/applications/web/revisions/v3.2.1/metadata", "/applications/web/managed-resources",
		"/applications/web/resource?" + webResource, "/applications/web/resource/actions?" + webResource,
		"/applications/web/resource/links?" + webResource, "/applications/web/links", "/applications/web/events",
		"/applications/web/manifests", "/clusters", "/clusters/in-cluster?id.type=name", "/projects", "/settings", "/version",
		"/account/can-i/applications/get/default/web",
	} {
		own, argo := env.get(t, "/v1/deploy"+p, acme), env.get(t, "/api/v1"+p, acme)
		if own.code != http.StatusOK || argo.code != own.code || argo.body != own.body {
			t.Errorf("%s: /v1/deploy %d, /api/v1 %d:\n%s\n%s", p, own.code, argo.code, own.body, argo.body)
		}
	}
	if v1, api := env.get(t, "/v1/deploy/version", acme), env.get(t, "/api/version", acme); api.code != 200 || api.body != v1.body {
		t.Errorf("/api/version: %d %s", api.code, api.body)
	}
}

// TestRevisionMetadataOfDeclared: the revision an app declares has metadata
// before it is rolled out (it is not in the history yet).
func TestRevisionMetadataOfDeclared(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	r := env.get(t, "/api/v1/applications/iam/revisions/v1.5.0/metadata?appNamespace=hanzo-testnet", root)
	var m uiRevisionMetadata
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &m) != nil || !strings.Contains(m.Message, "v1.5.0") || m.Date != "" {
		t.Fatalf("declared revision: %d %s", r.code, r.body)
	}
	if r := env.get(t, "/api/v1/applications/iam/revisions/v1.4.9/metadata?appNamespace=hanzo-testnet", root); r.code != http.StatusNotFound {
		t.Fatalf("unknown revision: %d %s", r.code, r.body)
	}
}

// TestEventsOfTheApp: the events route lists the Events of the app's own
// objects only: not another app's in the same namespace, not a deleted
// pod's, not another tenant's; one object's when named.
func TestEventsOfTheApp(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	names := func(path string) []string {
		t.Helper()
		r := env.get(t, path, root)
		var l corev1.EventList
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &l) != nil {
			t.Fatalf("GET %s: %d %s", path, r.code, r.body)
		}
		var out []string
		for _, e := range l.Items {
			if len(e.ManagedFields) > 0 {
				t.Errorf("GET %s: event %s carries managedFields", path, e.Name)
			}
			out = append(out, e.Name)
		}
		return out
	}
	for path, want := range map[string][]string{
		"/api/v1/applications/web/events?appNamespace=tenant-acme":                                                   {"web-deploy.1", "web-pod.1"},
		"/api/v1/applications/web/events?resourceUID=40000000-0000-0000-0000-000000000004":                           {"web-pod.1"},
		"/api/v1/applications/web/events?resourceNamespace=tenant-acme&resourceName=web-55d6c7-x2x2x":                {"web-pod.1"},
		"/api/v1/applications/worker/events":                                                                         {"worker-deploy.1"},
		"/api/v1/applications/api/events":                                                                            {"api-deploy.1"},
		"/api/v1/applications/canary/events":                                                                         nil,
		"/v1/deploy/applications/web/events?resourceName=web&resourceNamespace=tenant-acme&appNamespace=tenant-acme": {"web-deploy.1"},
	} {
		if got := names(path); !slices.Equal(got, want) {
			t.Errorf("GET %s: events %v, want %v", path, got, want)
		}
	}
	// Another app's object, or one that is gone, is not the app's.
	for _, p := range []string{
		"/api/v1/applications/web/events?resourceUID=50000000-0000-0000-0000-000000000002",
		"/api/v1/applications/web/events?resourceUID=40000000-0000-0000-0000-0000000000ff",
		"/api/v1/applications/web/events?resourceName=api&resourceNamespace=tenant-globex",
	} {
		if r := env.get(t, p, root); r.code != http.StatusNotFound {
			t.Errorf("GET %s: %d %s, want 404", p, r.code, r.body)
		}
	}
	env.events.err = errBoom
	r := env.get(t, "/api/v1/applications/web/events", root)
	if msg := errorMessage(t, r); r.code != http.StatusBadGateway || strings.Contains(msg, "10.0.0.9") {
		t.Errorf("events with the API server down: %d %q", r.code, msg)
	}
}

// TestArgoLogs: Argo CD's logs form, as JSON lines for a REST client and as
// SSE for the UI's EventSource, each line a {"result": LogEntry} and the
// last one marked so.
func TestArgoLogs(t *testing.T) {
	env := newServerEnv(t)
	acme := env.token(t, userAlice, time.Hour)
	env.pods.text = "2026-11-30T10:00:00.123456789Z listening on :8000\n2026-11-30T10:00:01Z ready\n"
	read := func(body string, sse bool) []uiLogEntry {
		t.Helper()
		var out []uiLogEntry
		sc := bufio.NewScanner(strings.NewReader(body))
		for sc.Scan() {
			line := sc.Text()
			if sse {
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				line = strings.TrimPrefix(line, "data: ")
			}
			var r uiLogResult
			dec := json.NewDecoder(strings.NewReader(line))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			out = append(out, r.Result)
		}
		return out
	}
	want := []uiLogEntry{
		{Content: "listening on :8000", TimeStamp: "2026-11-30T10:00:00Z", TimeStampStr: "2026-11-30T10:00:00.123456789Z", PodName: "web-55d6c7-x2x2x"},
		{Content: "ready", TimeStamp: "2026-11-30T10:00:01Z", TimeStampStr: "2026-11-30T10:00:01Z", PodName: "web-55d6c7-x2x2x"},
		{PodName: "web-55d6c7-x2x2x", Last: true},
	}
	path := "/api/v1/applications/web/logs?appNamespace=tenant-acme&namespace=tenant-acme&podName=web-55d6c7-x2x2x&container=web&follow=false&tailLines=100&sinceSeconds=0"
	r := env.get(t, path, acme)
	if got := read(r.body, false); r.code != http.StatusOK || !slices.Equal(got, want) {
		t.Fatalf("JSON lines: %d %+v", r.code, got)
	}
	if env.pods.last.TailLines != 100 || !env.pods.last.Timestamps || env.pods.last.Pod != "web-55d6c7-x2x2x" {
		t.Fatalf("log request %+v", env.pods.last)
	}
	r = env.get(t, path, acme, "Accept", "text/event-stream")
	if got := read(r.body, true); r.code != http.StatusOK || r.header.Get("Content-Type") != "text/event-stream" || !slices.Equal(got, want) {
		t.Fatalf("SSE: %d %s %+v", r.code, r.header.Get("Content-Type"), got)
	}
	// Without podName, the app's newest running pod; by resource too.
	for _, p := range []string{"/api/v1/applications/web/logs?follow=false", "/api/v1/applications/web/logs?follow=false&kind=Deployment&group=apps&resourceName=web"} {
		if got := read(env.get(t, p, acme).body, false); len(got) != 3 || got[0].PodName == "" {
			t.Errorf("GET %s: %+v", p, got)
		}
	}
	for _, c := range []struct{ query, want string }{
		{"podName=api-1", "not part of application"},
		{"podName=web-55d6c7-x2x2x&namespace=tenant-globex", "not part of application"},
		{"sinceSeconds=60", "sinceSeconds is not supported"},
		{"sinceTime=" + url.QueryEscape("2026-11-30T10:00:00Z"), "sinceTime is not supported"},
		{"filter=error", "filter is not supported"},
		{"previous=true", "previous is not supported"},
		{"tailLines=0", "tailLines must be"},
		{"follow=yes", "follow must be"},
		{"container=nosuch", "has no container"},
	} {
		r := env.get(t, "/api/v1/applications/web/logs?"+c.query, acme)
		if r.code/100 != 4 || !strings.Contains(errorMessage(t, r), c.want) {
			t.Errorf("logs?%s: %d %s, want it to say %q", c.query, r.code, r.body, c.want)
		}
	}
}

// TestResourceRoutesRefuse: the resource routes name only objects of the
// app's tree, of kinds deployd reads: a Secret never.
func TestResourceRoutesRefuse(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	for _, c := range []struct {
		query, want string
		code        int
	}{
		{"appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web-env&version=v1&kind=Secret&group=", "is not one deployd reads", 400},
		{"appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web&version=v1&kind=Service&group=", "not part of application", 404},
		{"appNamespace=tenant-acme&namespace=tenant-acme&resourceName=worker&version=v1&kind=Deployment&group=apps", "not part of application", 404},
		{"appNamespace=tenant-acme&namespace=tenant-globex&resourceName=api&version=v1&kind=Deployment&group=apps", "not part of application", 404},
		{"appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web&version=v1beta1&kind=Deployment&group=apps", "is not the one deployd reads", 400},
		{"appNamespace=tenant-acme&namespace=tenant-acme&version=v1&kind=Deployment&group=apps", "name the resource", 400},
	} {
		for _, route := range []string{"resource", "resource/actions", "resource/links"} {
			r := env.get(t, "/api/v1/applications/web/"+route+"?"+c.query, root)
			if r.code != c.code || !strings.Contains(errorMessage(t, r), c.want) {
				t.Errorf("%s?%s: %d %s, want %d saying %q", route, c.query, r.code, r.body, c.code, c.want)
			}
		}
	}
	r := env.get(t, "/api/v1/applications/web/managed-resources?appNamespace=tenant-acme&kind=Secret", root)
	if r.code != http.StatusOK || strings.TrimSpace(r.body) != `{"items":[]}` {
		t.Errorf("managed-resources of kind Secret: %d %s", r.code, r.body)
	}
}

// TestManagedResourcesDesiredFromGit: for an object the engine manages,
// managed-resources' desired side is the engine's rendering; the manifests
// route lists it.
func TestManagedResourcesDesiredFromGit(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	f.desired[liveKey(projection.KindApp, "hanzo", "gateway")] = map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "gateway", "namespace": "hanzo"},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/gateway", "tag": "v2.1.0"}},
	}
	r := env.get(t, "/api/v1/applications/gateway/managed-resources?kind=App", root)
	var ans uiManagedResourcesResponse
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &ans) != nil || len(ans.Items) != 1 {
		t.Fatalf("managed-resources: %d %s", r.code, r.body)
	}
	it := ans.Items[0]
	if !it.Modified || !strings.Contains(it.TargetState, `"tag":"v2.1.0"`) || !strings.Contains(it.NormalizedLiveState, `"tag":"v2.0.0"`) ||
		!strings.Contains(it.Diff, `"/spec/image/tag"`) || strings.Contains(it.NormalizedLiveState, `"status"`) {
		t.Fatalf("the App's diff: %+v", it)
	}
	r = env.get(t, "/api/v1/applications/gateway/manifests", root)
	if r.code != http.StatusOK || !strings.Contains(r.body, `v2.1.0`) {
		t.Fatalf("manifests: %d %s", r.code, r.body)
	}
}

// TestRepoAppDetails: the PARAMETERS tab's appdetails query answers a
// directory source for an app the caller sees, 404 for one it does not,
// and 400 naming the shape for a body that is not Argo CD's.
func TestRepoAppDetails(t *testing.T) {
	env := newServerEnv(t)
	root := env.token(t, userRoot, time.Hour)
	acme := env.token(t, userAlice, time.Hour)
	repo := url.PathEscape("https://github.com/hanzoai/universe")
	body := func(app string) string {
		return `{"source":{"repoURL":"https://github.com/hanzoai/universe","path":"infra/x","targetRevision":"HEAD"},"appName":"` + app + `","appProject":"default","sourceIndex":0,"versionId":null}`
	}
	path := "/api/v1/repositories/" + repo + "/appdetails"
	r := env.post(t, path, root, body("iam"))
	if r.code != http.StatusOK || strings.TrimSpace(r.body) != `{"directory":{},"path":"infra/x","type":"Directory"}` {
		t.Fatalf("appdetails of iam: %d %s", r.code, r.body)
	}
	if r := env.post(t, path, acme, body("iam")); r.code != http.StatusNotFound {
		t.Errorf("appdetails of another tenant's app: %d %s", r.code, r.body)
	}
	if r := env.post(t, path, acme, body("web")); r.code != http.StatusOK {
		t.Errorf("appdetails of acme's own app: %d %s", r.code, r.body)
	}
	for _, bad := range []string{`{`, `{"appName":"iam"}`, `{"source":{"repoURL":"x"}}`, `[1]`} {
		if r := env.post(t, path, root, bad); r.code != http.StatusBadRequest || !strings.Contains(errorMessage(t, r), "appdetails body") {
			t.Errorf("appdetails with %s: %d %s", bad, r.code, r.body)
		}
	}
	if r := env.post(t, "/api/v1/repositories/"+url.PathEscape("https://other.example/x")+"/appdetails", root, body("iam")); r.code != http.StatusBadRequest {
		t.Errorf("appdetails for another repository: %d %s", r.code, r.body)
	}
}

func TestMinorVersion(t *testing.T) {
	for in, want := range map[string]string{"v1.35.0": "1.35", "v1.29.4-gke.1043": "1.29", "1.31": "1.31", "": "", "v1": "", "dev": ""} {
		if got := minorVersion(in); got != want {
			t.Errorf("minorVersion(%q) = %q, want %q", in, got, want)
		}
	}
}
