package handlers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/hanzoai/deploy/projection"
)

// wireRoutes: every read route's answer, as a golden file and decoded into
// the Argo CD UI mirror types (or deployd's own, for its own routes) with
// unknown fields disallowed.
var wireRoutes = []struct {
	golden string
	who    string // superadmin or acme
	path   string
	into   func() any
}{
	{"applications.json", "superadmin", "/v1/deploy/applications", func() any { return &uiApplicationList{} }},
	{"applications.acme.json", "acme", "/v1/deploy/applications", func() any { return &uiApplicationList{} }},
	{"applications.fields.json", "superadmin", "/v1/deploy/applications?fields=metadata.resourceVersion,items.metadata.name,items.status.health.status", func() any { return &uiApplicationList{} }},
	{"application.gateway.json", "superadmin", "/v1/deploy/applications/gateway", func() any { return &uiApplication{} }},
	{"application.platform.json", "superadmin", "/v1/deploy/applications/platform", func() any { return &uiApplication{} }},
	{"resource-tree.iam.json", "superadmin", "/v1/deploy/applications/iam/resource-tree?appNamespace=hanzo", func() any { return &uiApplicationTree{} }},
	{"resource-tree.docs.json", "acme", "/v1/deploy/applications/docs/resource-tree", func() any { return &uiApplicationTree{} }},
	{"syncwindows.json", "superadmin", "/v1/deploy/applications/web/syncwindows", func() any { return &uiSyncWindowState{} }},
	{"revision-metadata.json", "acme", "/v1/deploy/applications/web/revisions/v3.2.1/metadata", func() any { return &uiRevisionMetadata{} }},
	{"clusters.json", "superadmin", "/v1/deploy/clusters", func() any { return &uiClusterList{} }},
	{"clusters.acme.json", "acme", "/v1/deploy/clusters", func() any { return &uiClusterList{} }},
	{"projects.json", "superadmin", "/v1/deploy/projects", func() any { return &uiProjectList{} }},
	{"projects.acme.json", "acme", "/v1/deploy/projects", func() any { return &uiProjectList{} }},
	{"settings.json", "acme", "/v1/deploy/settings", func() any { return &uiAuthSettings{} }},
	{"version.json", "acme", "/v1/deploy/version", func() any { return &uiVersionMessage{} }},
	{"userinfo.json", "acme", "/v1/deploy/session/userinfo", func() any { return &uiUserInfo{} }},
	{"can-i.sync.acme.json", "acme", "/v1/deploy/account/can-i/applications/sync/default/web", func() any { return &uiCanI{} }},
	{"can-i.sync.superadmin.json", "superadmin", "/v1/deploy/account/can-i/applications/sync/default/web", func() any { return &uiCanI{} }},
	{"gitops.json", "superadmin", "/v1/deploy/gitops", func() any { return &gitopsWire{} }},
	{"native-tree.gateway.json", "superadmin", "/v1/deploy/gateway/tree", func() any { return &projection.NativeTree{} }},
	{"resource.iam-service.json", "superadmin", "/v1/deploy/iam/resource/:Service:hanzo:iam?namespace=hanzo", func() any { return &resourceWire{} }},
	{"logs.web.json", "acme", "/v1/deploy/web/logs?tail=10", func() any { return &logsAnswer{} }},
	{"paas.apps.json", "superadmin", "/v1/paas/apps", func() any { return &paasList{} }},
	{"paas.app.api.json", "superadmin", "/v1/paas/apps/api", func() any { return &projection.AppView{} }},
	{"health.json", "superadmin", "/v1/deploy/health", func() any { return &healthBody{} }},

	// Argo CD's own paths and the routes its UI needs beyond the list and
	// the tree.
	{"api.version.json", "acme", "/api/version", func() any { return &uiVersionMessage{} }},
	{"api.applications.acme.json", "acme", "/api/v1/applications?projects=default&selector=&appNamespace=", func() any { return &uiApplicationList{} }},
	{"managed-resources.iam.json", "superadmin", "/api/v1/applications/iam/managed-resources?appNamespace=hanzo&fields=", func() any { return &uiManagedResourcesResponse{} }},
	{"managed-resources.web-deployment.json", "acme", "/api/v1/applications/web/managed-resources?appNamespace=tenant-acme&group=apps&kind=Deployment&namespace=tenant-acme&name=web", func() any { return &uiManagedResourcesResponse{} }},
	{"resource.web-pod.json", "acme", "/api/v1/applications/web/resource?name=web-55d6c7-x2x2x&appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web-55d6c7-x2x2x&version=v1&kind=Pod&group=", func() any { return &uiApplicationResourceResponse{} }},
	{"resource-actions.web-deployment.json", "superadmin", "/api/v1/applications/web/resource/actions?appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web&version=v1&kind=Deployment&group=apps", func() any { return &uiResourceActionsListResponse{} }},
	{"resource-actions.web-deployment.acme.json", "acme", "/api/v1/applications/web/resource/actions?appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web&version=v1&kind=Deployment&group=apps", func() any { return &uiResourceActionsListResponse{} }},
	{"resource-actions.web-pod.json", "acme", "/api/v1/applications/web/resource/actions?appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web-55d6c7-x2x2x&version=v1&kind=Pod&group=", func() any { return &uiResourceActionsListResponse{} }},
	{"resource-links.web-deployment.json", "acme", "/api/v1/applications/web/resource/links?name=web&appNamespace=tenant-acme&namespace=tenant-acme&resourceName=web&version=v1&kind=Deployment&group=apps", func() any { return &uiLinksResponse{} }},
	{"links.web.json", "acme", "/api/v1/applications/web/links?namespace=tenant-acme", func() any { return &uiLinksResponse{} }},
	{"events.web.json", "acme", "/api/v1/applications/web/events?appNamespace=tenant-acme", func() any { return &corev1.EventList{} }},
	{"events.web-pod.json", "acme", "/api/v1/applications/web/events?appNamespace=tenant-acme&resourceUID=40000000-0000-0000-0000-000000000004&resourceNamespace=tenant-acme&resourceName=web-55d6c7-x2x2x", func() any { return &corev1.EventList{} }},
	{"cluster.json", "acme", "/api/v1/clusters/https%3A%2F%2Fkubernetes.default.svc?id.type=url", func() any { return &uiCluster{} }},
	{"manifests.iam.json", "superadmin", "/api/v1/applications/iam/manifests?name=iam&appNamespace=hanzo&revision=", func() any { return &uiManifestResponse{} }},
	{"api.revision-metadata.json", "acme", "/api/v1/applications/web/revisions/v3.2.1/metadata?appNamespace=tenant-acme", func() any { return &uiRevisionMetadata{} }},
}

type gitopsWire struct {
	Installed    bool            `json:"installed"`
	Reason       string          `json:"reason,omitempty"`
	Applications []uiApplication `json:"applications"`
	Engine       engineWire      `json:"engine"`
}

// engineWire is the engine's state as the dashboard reads it.
type engineWire struct {
	Enabled bool `json:"enabled"`
	Source  struct {
		Path string `json:"path"`
		Ref  string `json:"ref"`
		Repo string `json:"repo"`
	} `json:"source"`
	Revision string `json:"revision"`
	Runs     int64  `json:"runs"`
	LastRun  *struct {
		ID         string `json:"id"`
		Trigger    string `json:"trigger"`
		StartedAt  string `json:"startedAt"`
		FinishedAt string `json:"finishedAt"`
		Declared   int    `json:"declared"`
		Synced     int    `json:"synced"`
		Failed     int    `json:"failed"`
		Pruned     int    `json:"pruned"`
		Error      string `json:"error,omitempty"`
	} `json:"lastRun"`
	NextRunAt *string `json:"nextRunAt"`
}

// decodeStrict decodes body into v with unknown fields disallowed.
func decodeStrict(t *testing.T, body string, v any) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%T: %v\n%s", v, err, body)
	}
}

type resourceWire struct {
	Ref           string         `json:"ref"`
	Health        string         `json:"health"`
	HealthMessage string         `json:"healthMessage"`
	LiveManifest  map[string]any `json:"liveManifest"`
	DesiredSource string         `json:"desiredSource"`
	Diff          struct {
		Modified        bool             `json:"modified"`
		DesiredManifest map[string]any   `json:"desiredManifest"`
		Patch           []map[string]any `json:"patch"`
	} `json:"diff"`
}

var goVersion = regexp.MustCompile(`"GoVersion":"[^"]*"`)

func TestWireShapes(t *testing.T) {
	env := newServerEnv(t)
	// The iam Service carries a last-applied configuration that differs
	// from the live object, as after a hand edit.
	svc := env.live.objs[liveKey(projection.KindService, "hanzo", "iam")]
	md := svc["metadata"].(map[string]any)
	md["annotations"] = map[string]any{projection.AnnotationLastApplied: `{"apiVersion":"v1","kind":"Service","metadata":{"name":"iam","namespace":"hanzo"},"spec":{"type":"ClusterIP","selector":{"app.kubernetes.io/instance":"iam"},"ports":[{"port":80,"targetPort":8080}]}}`}
	tokens := map[string]string{"superadmin": env.token(t, userRoot, 1<<40), "acme": env.token(t, userAlice, 1<<40)}
	for _, w := range wireRoutes {
		r := env.get(t, w.path, tokens[w.who])
		if r.code != http.StatusOK {
			t.Errorf("%s: %d %s", w.path, r.code, r.body)
			continue
		}
		body := goVersion.ReplaceAllString(r.body, `"GoVersion":"go"`)
		body = strings.ReplaceAll(body, env.URL, "http://deployd.test")
		body = strings.ReplaceAll(body, env.m.Issuer(), "http://issuer.test")
		body = strings.ReplaceAll(body, env.m.ClientID, "deployd-client")
		golden(t, w.golden, []byte(body))
		dec := json.NewDecoder(bytes.NewReader([]byte(body)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(w.into()); err != nil {
			t.Errorf("%s (%s) does not decode into the dashboard's type: %v", w.path, w.golden, err)
		}
	}
}
