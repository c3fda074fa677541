package handlers

import (
	"encoding/json"
	"flag"
	"net/http"
	"slices"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files under testdata/")

// markers are strings only a given tenant's (or the platform's) objects
// carry in the golden fleet: uids, image repositories, namespaces.
var markers = map[string][]string{
	"platform": {"hanzo-testnet", "ghcr.io/hanzoai", "10000000-", "20000000-", "30000000-", "90000000-"},
	"acme":     {"tenant-acme", "registry.acme.dev", "40000000-", "50000000-", "80000000-"},
	"globex":   {"tenant-globex", "ghcr.io/globex", "60000000-", "70000000-"},
}

// forbiddenFor lists the tenants whose markers must never reach identity.
var forbiddenFor = map[string][]string{
	"superadmin":      nil,
	"acme-member":     {"platform", "globex"},
	"globex-orgadmin": {"platform", "acme"},
	"no-org":          {"platform", "acme", "globex"},
	"anonymous":       {"platform", "acme", "globex"},
	"expired":         {"platform", "acme", "globex"},
}

// isolationMatrix: every read route × every identity → the status, in the
// order superadmin, acme-member, globex-orgadmin, no-org, anonymous, expired.
var isolationMatrix = []struct {
	path string
	want [6]int
}{
	{"/v1/deploy/applications", [6]int{200, 200, 200, 403, 401, 401}},
	{"/v1/deploy/applications?selector=hanzo.ai/org%3Dglobex", [6]int{200, 200, 200, 403, 401, 401}},
	{"/v1/deploy/applications?fields=items.metadata.name,items.metadata.uid,items.status.summary.images", [6]int{200, 200, 200, 403, 401, 401}},
	{"/v1/deploy/applications/web?appNamespace=tenant-acme", [6]int{200, 200, 404, 403, 401, 401}},
	{"/v1/deploy/applications/api", [6]int{200, 404, 200, 403, 401, 401}},
	{"/v1/deploy/applications/iam?appNamespace=hanzo", [6]int{200, 404, 404, 403, 401, 401}},
	{"/v1/deploy/applications/platform", [6]int{200, 404, 404, 403, 401, 401}},
	{"/v1/deploy/applications/web/resource-tree", [6]int{200, 200, 404, 403, 401, 401}},
	{"/v1/deploy/applications/api/resource-tree", [6]int{200, 404, 200, 403, 401, 401}},
	{"/v1/deploy/applications/web/syncwindows", [6]int{200, 200, 404, 403, 401, 401}},
	{"/v1/deploy/applications/web/revisions/v3.2.1/metadata", [6]int{200, 200, 404, 403, 401, 401}},
	{"/v1/deploy/applications/gateway/revisions/v1.9.0/metadata", [6]int{200, 404, 404, 403, 401, 401}},
	{"/v1/deploy/clusters", [6]int{200, 200, 200, 403, 401, 401}},
	{"/v1/deploy/projects", [6]int{200, 200, 200, 403, 401, 401}},
	{"/v1/deploy/gitops", [6]int{200, 403, 403, 403, 401, 401}},
	{"/v1/deploy/web/tree", [6]int{200, 200, 404, 403, 401, 401}},
	{"/v1/deploy/api/tree", [6]int{200, 404, 200, 403, 401, 401}},
	{"/v1/deploy/web/resource/:Pod:tenant-acme:web-55d6c7-x2x2x", [6]int{200, 200, 404, 403, 401, 401}},
	{"/v1/deploy/api/resource/apps:Deployment:tenant-globex:api", [6]int{200, 404, 200, 403, 401, 401}},
	{"/v1/deploy/web/resource/apps:Deployment:tenant-globex:api", [6]int{404, 404, 404, 403, 401, 401}},
	{"/v1/deploy/web/logs", [6]int{200, 200, 404, 403, 401, 401}},
	{"/v1/deploy/api/logs", [6]int{200, 404, 200, 403, 401, 401}},
	{"/v1/paas/apps", [6]int{200, 403, 200, 403, 401, 401}},
	{"/v1/paas/apps/web", [6]int{200, 403, 404, 403, 401, 401}},
	{"/v1/paas/apps/api", [6]int{200, 403, 200, 403, 401, 401}},
	{"/v1/deploy/settings", [6]int{200, 200, 200, 200, 200, 200}},
	{"/v1/deploy/version", [6]int{200, 200, 200, 200, 200, 200}},
	{"/v1/deploy/account/can-i/applications/sync/default/tenant-globex/api", [6]int{200, 200, 200, 200, 401, 401}},
	{"/v1/deploy/health", [6]int{200, 200, 200, 200, 200, 200}},
	{"/v1/paas/health", [6]int{200, 200, 200, 200, 200, 200}},
	{"/v1/deploy/session/userinfo", [6]int{200, 200, 200, 200, 200, 200}},

	// Argo CD's own paths, and the routes its UI needs.
	{"/api/v1/applications", [6]int{200, 200, 200, 403, 401, 401}},
	{"/api/v1/applications?fields=items.metadata.name,items.metadata.uid&refresh=normal", [6]int{200, 200, 200, 403, 401, 401}},
	{"/api/v1/applications/web?appNamespace=tenant-acme&refresh=normal", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/api", [6]int{200, 404, 200, 403, 401, 401}},
	{"/api/v1/applications/iam?appNamespace=hanzo", [6]int{200, 404, 404, 403, 401, 401}},
	{"/api/v1/applications/web/resource-tree", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/web/syncwindows?name=web&appNamespace=tenant-acme", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/web/revisions/v3.2.1/metadata", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/iam/revisions/v1.5.0/metadata?appNamespace=hanzo-testnet", [6]int{200, 404, 404, 403, 401, 401}},
	{"/api/v1/applications/web/managed-resources", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/api/managed-resources", [6]int{200, 404, 200, 403, 401, 401}},
	{"/v1/deploy/applications/iam/managed-resources?appNamespace=hanzo", [6]int{200, 404, 404, 403, 401, 401}},
	{"/api/v1/applications/web/resource?" + webResource, [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/api/resource?appNamespace=tenant-globex&namespace=tenant-globex&resourceName=api&version=v1&kind=Deployment&group=apps", [6]int{200, 404, 200, 403, 401, 401}},
	{"/api/v1/applications/web/resource?appNamespace=tenant-acme&namespace=tenant-globex&resourceName=api&version=v1&kind=Deployment&group=apps", [6]int{404, 404, 404, 403, 401, 401}},
	{"/api/v1/applications/web/resource?namespace=tenant-acme&resourceName=web-env&version=v1&kind=Secret&group=", [6]int{400, 400, 404, 403, 401, 401}},
	{"/api/v1/applications/web/resource/actions?" + webResource, [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/web/resource/links?" + webResource, [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/web/links", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/web/events", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/api/events", [6]int{200, 404, 200, 403, 401, 401}},
	{"/api/v1/applications/web/events?resourceUID=60000000-0000-0000-0000-000000000002", [6]int{404, 404, 404, 403, 401, 401}},
	{"/api/v1/applications/web/manifests", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/iam/manifests?appNamespace=hanzo", [6]int{200, 404, 404, 403, 401, 401}},
	{"/api/v1/applications/web/logs?follow=false", [6]int{200, 200, 404, 403, 401, 401}},
	{"/api/v1/applications/api/logs?follow=false", [6]int{404, 404, 404, 403, 401, 401}}, // api has no running pod
	{"/api/v1/clusters", [6]int{200, 200, 200, 403, 401, 401}},
	{"/api/v1/clusters/https%3A%2F%2Fkubernetes.default.svc?id.type=url", [6]int{200, 200, 200, 403, 401, 401}},
	{"/api/v1/projects?fields=items.metadata.name", [6]int{200, 200, 200, 403, 401, 401}},
	{"/api/v1/settings", [6]int{200, 200, 200, 200, 200, 200}},
	{"/api/version", [6]int{200, 200, 200, 200, 200, 200}},
	{"/api/v1/account/can-i/applications/get/default/tenant-globex/api", [6]int{200, 200, 200, 200, 401, 401}},
	{"/api/v1/session/userinfo", [6]int{200, 200, 200, 200, 200, 200}},
}

// TestTenantIsolation runs the matrix and checks every body for another
// tenant's bytes.
func TestTenantIsolation(t *testing.T) {
	env := newServerEnv(t)
	for i, id := range identities {
		token := id.token(env, t)
		for _, row := range isolationMatrix {
			r := env.get(t, row.path, token)
			if r.code != row.want[i] {
				t.Errorf("%s GET %s: got %d, want %d: %s", id.name, row.path, r.code, row.want[i], r.body)
				continue
			}
			if r.code >= 400 {
				errorMessage(t, r)
			}
			for _, tenant := range forbiddenFor[id.name] {
				for _, m := range markers[tenant] {
					// A body may echo what the caller itself sent.
					if strings.Contains(r.body, m) && !strings.Contains(row.path, m) {
						t.Errorf("%s GET %s: the body carries %q of %s:\n%s", id.name, row.path, m, tenant, r.body)
					}
				}
			}
		}
	}
}

// TestOtherTenantIsLikeMissing: another tenant's app is answered exactly
// like an app that exists nowhere — same status, same body but for the name,
// same headers.
func TestOtherTenantIsLikeMissing(t *testing.T) {
	env := newServerEnv(t)
	acme := env.token(t, userAlice, 0x7fffffff)
	for _, pair := range [][2]string{
		{"/v1/deploy/applications/canary", "/v1/deploy/applications/canarx"},
		{"/v1/deploy/applications/canary/resource-tree", "/v1/deploy/applications/canarx/resource-tree"},
		{"/v1/deploy/canary/tree", "/v1/deploy/canarx/tree"},
		{"/v1/deploy/canary/logs", "/v1/deploy/canarx/logs"},
		{"/v1/deploy/canary/resource/hanzo.ai:App:tenant-globex:canary", "/v1/deploy/canarx/resource/hanzo.ai:App:tenant-globex:canary"},
		{"/api/v1/applications/canary", "/api/v1/applications/canarx"},
		{"/api/v1/applications/canary/managed-resources", "/api/v1/applications/canarx/managed-resources"},
		{"/api/v1/applications/canary/events", "/api/v1/applications/canarx/events"},
		{"/api/v1/applications/canary/manifests", "/api/v1/applications/canarx/manifests"},
		{"/api/v1/applications/canary/links", "/api/v1/applications/canarx/links"},
		{"/api/v1/applications/canary/logs", "/api/v1/applications/canarx/logs"},
		{"/api/v1/applications/canary/resource?namespace=tenant-globex&resourceName=canary&version=v1&kind=App&group=hanzo.ai", "/api/v1/applications/canarx/resource?namespace=tenant-globex&resourceName=canary&version=v1&kind=App&group=hanzo.ai"},
		{"/api/v1/applications/canary/resource/actions?namespace=tenant-globex&resourceName=canary&version=v1&kind=App&group=hanzo.ai", "/api/v1/applications/canarx/resource/actions?namespace=tenant-globex&resourceName=canary&version=v1&kind=App&group=hanzo.ai"},
	} {
		other, missing := env.get(t, pair[0], acme), env.get(t, pair[1], acme)
		if other.code != http.StatusNotFound || other.code != missing.code {
			t.Errorf("%s: %d, %s: %d; want both 404", pair[0], other.code, pair[1], missing.code)
		}
		if strings.ReplaceAll(other.body, "canary", "canarx") != missing.body {
			t.Errorf("bodies differ:\n%s\n%s", other.body, missing.body)
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Cache-Control", "Etag"} {
			if other.header.Get(h) != missing.header.Get(h) {
				t.Errorf("%s header %s: %q vs %q", pair[0], h, other.header.Get(h), missing.header.Get(h))
			}
		}
	}
}

// TestListsPerIdentity: each identity's list holds exactly its scope.
func TestListsPerIdentity(t *testing.T) {
	env := newServerEnv(t)
	want := map[string][]string{
		"superadmin":      {"hanzo/gateway", "hanzo/iam", "hanzo-testnet/iam", "tenant-acme/docs", "tenant-acme/web", "tenant-acme/worker", "tenant-globex/api", "tenant-globex/canary", "hanzo/platform"},
		"acme-member":     {"tenant-acme/docs", "tenant-acme/web", "tenant-acme/worker"},
		"globex-orgadmin": {"tenant-globex/api", "tenant-globex/canary"},
	}
	for _, id := range identities[:3] {
		r := env.get(t, "/v1/deploy/applications?fields=items.metadata.name,items.metadata.namespace", id.token(env, t))
		var list struct {
			Items []struct {
				Metadata struct{ Name, Namespace string }
			}
		}
		if err := json.Unmarshal([]byte(r.body), &list); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range list.Items {
			got = append(got, it.Metadata.Namespace+"/"+it.Metadata.Name)
		}
		if !slices.Equal(got, want[id.name]) {
			t.Errorf("%s lists %v, want %v", id.name, got, want[id.name])
		}
	}
}

// TestEngineRoutesIsolation: the engine's routes × every identity. Only a
// SuperAdmin runs the engine or reads its state; the webhook answers by its
// signature alone, the same to everyone; no refusal carries fleet data.
func TestEngineRoutesIsolation(t *testing.T) {
	env, f := newEngineEnv(t)
	push := `{"ref":"refs/heads/main"}`
	rows := []struct {
		method, path string
		header       []string
		want         [6]int
	}{
		{http.MethodPost, reconcilePath, nil, [6]int{200, 403, 403, 403, 401, 401}},
		{http.MethodPost, reconcilePath + "?dryRun=true", nil, [6]int{200, 403, 403, 403, 401, 401}},
		{http.MethodGet, "/v1/deploy/gitops", nil, [6]int{200, 403, 403, 403, 401, 401}},
		{http.MethodPost, webhookPath, []string{"X-Hub-Signature-256", "sha256=00"}, [6]int{401, 401, 401, 401, 401, 401}},
	}
	for i, id := range identities {
		token := id.token(env, t)
		for _, row := range rows {
			r := env.do(t, row.method, row.path, token, nil, row.header...)
			if r.code != row.want[i] {
				t.Errorf("%s %s %s: got %d, want %d: %s", id.name, row.method, row.path, r.code, row.want[i], r.body)
				continue
			}
			if r.code >= 400 {
				errorMessage(t, r)
				if strings.Contains(r.body, testEngineSource.Repo) || strings.Contains(r.body, testRevision) {
					t.Errorf("%s %s %s: a refusal names the engine's source: %s", id.name, row.method, row.path, r.body)
				}
			}
			for _, tenant := range forbiddenFor[id.name] {
				for _, m := range markers[tenant] {
					if strings.Contains(r.body, m) {
						t.Errorf("%s %s %s: the body carries %q of %s", id.name, row.method, row.path, m, tenant)
					}
				}
			}
		}
	}
	// A signed delivery needs no principal.
	if r := env.post(t, webhookPath, "", push, "X-Hub-Signature-256", githubSignature(push)); r.code != http.StatusAccepted {
		t.Fatalf("a signed push without a principal: %d %s", r.code, r.body)
	}
	reconciles, triggers := f.calls()
	if len(reconciles) != 2 || len(triggers) != 1 {
		t.Fatalf("the engine ran %v and was triggered %v; want the SuperAdmin's two runs and the signed push", reconciles, triggers)
	}
}
