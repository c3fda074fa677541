package main

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/auth/hydratest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
)

// argoUIDir is the stock Argo CD UI that hack/build-argo-ui.sh builds
// (make tools runs it). A missing build skips with a message naming make
// test, or fails when DEPLOYD_REQUIRE_TOOLS=1, as make test sets.
func argoUIDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DEPLOYD_ARGO_UI")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "deployd", "argo-ui-v3.6.0")
	}
	dir = filepath.Join(dir, "app")
	if _, err := os.Stat(filepath.Join(dir, "index.html")); err == nil {
		return dir
	}
	missingTool(t, "the stock Argo CD UI is not built at "+dir, "run make tools (hack/build-argo-ui.sh)")
	return ""
}

// apiCall is one request the front passed to deployd.
type apiCall struct {
	method, path string
	status       int
}

// argoFront is a static file server in front of deployd, as a user runs
// the stock UI: the UI's files as they are, deployd's paths (/api, /auth,
// /v1, /extensions.js) passed through unchanged, and the UI's index for
// every other path (its client-side routes). It records what it passed.
type argoFront struct {
	URL string

	mu    sync.Mutex
	calls []apiCall
}

func startArgoFront(t *testing.T, dir string) (*argoFront, func(backend string)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &argoFront{URL: "http://" + ln.Addr().String()}
	var proxy *httputil.ReverseProxy
	files := http.FileServer(http.Dir(dir))
	index, err := os.ReadFile(filepath.Join(dir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/auth/") || strings.HasPrefix(p, "/v1/") || p == "/extensions.js":
			if os.Getenv("DEPLOYD_ARGOUI_DEBUG") != "" {
				fmt.Printf("front: %s %s\n", r.Method, r.URL.RequestURI())
			}
			rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
			proxy.ServeHTTP(rec, r)
			if r.Context().Err() != nil {
				return // the browser left (a new page): not deployd's answer
			}
			f.mu.Lock()
			f.calls = append(f.calls, apiCall{r.Method, r.URL.RequestURI(), rec.status})
			f.mu.Unlock()
		case p != "/" && fileIn(dir, p):
			files.ServeHTTP(w, r)
		default:
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write(index)
		}
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return f, func(backend string) {
		u, _ := url.Parse(backend)
		proxy = httputil.NewSingleHostReverseProxy(u)
		proxy.FlushInterval = -1
	}
}

func fileIn(dir, p string) bool {
	fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(path.Clean(p))))
	return err == nil && !fi.IsDir()
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// failed is every call since mark that deployd answered with a 4xx or
// 5xx, but those allowed says are expected.
func (f *argoFront) failed(mark int, allowed func(apiCall) bool) []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []apiCall
	for _, c := range f.calls[mark:] {
		if c.status >= 400 && (allowed == nil || !allowed(c)) {
			out = append(out, c)
		}
	}
	return out
}

func (f *argoFront) since(mark int) []apiCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls[mark:])
}

func (f *argoFront) mark() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.calls)
}

// uiFleet is the stock UI test's fleet: each App's image, replicas and
// whether its operator waits for a sync before rolling out.
type uiApp struct {
	namespace, name, org string
	tags                 []string // rolled out in turn at start
	declared             string   // declared after the roll-outs ("" = the last tag)
	replicas             int64
	manual               bool // rolled out on a sync only
}

var uiFleet = []uiApp{
	{namespace: "hanzo", name: "api", tags: []string{"v1.0.0", "v1.1.0"}, replicas: 2},
	{namespace: "hanzo", name: "worker", tags: []string{"v2.0.0-crash"}, replicas: 1},
	{namespace: "tenant-acme", name: "web", org: "acme", tags: []string{"v3.0.0", "v3.1.0"}, declared: "v3.2.0", replicas: 1, manual: true},
	{namespace: "tenant-acme", name: "batch", org: "acme", tags: []string{"v4.0.0"}, replicas: 0},
}

// uiOperator plays the operator for uiFleet against a cluster with
// controllers: each App's Deployment and Service, the Deployment's image
// following the App's tag (for a manual App only when a sync asked), and
// the App's status from its Deployment's.
type uiOperator struct {
	t       *testing.T
	c       *clustertest.Cluster
	holding atomic.Bool // manual Apps wait for a sync (after the start)
}

const syncedForAnnotation = "test.hanzo.ai/synced-for"

func (o *uiOperator) apply(a uiApp, tag string) {
	o.t.Helper()
	labels := map[string]any{}
	if a.org != "" {
		labels[projection.LabelOrg] = a.org
	}
	app := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": a.name, "namespace": a.namespace, "labels": labels},
		"spec":     map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/" + a.name, "tag": tag}, "replicas": a.replicas},
	}}
	apps := o.c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(a.namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		live, err := apps.Get(o.t.Context(), a.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = apps.Create(o.t.Context(), app, metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		_ = unstructured.SetNestedField(live.Object, tag, "spec", "image", "tag")
		_, err = apps.Update(o.t.Context(), live, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		o.t.Fatal(err)
	}
}

// reconcile brings every App's objects one step towards it; it answers
// whether all of them are where their App says.
func (o *uiOperator) reconcile(ctx context.Context) (bool, error) {
	settled := true
	for _, a := range uiFleet {
		ok, err := o.reconcileOne(ctx, a)
		if err != nil {
			return false, err
		}
		settled = settled && ok
	}
	return settled, nil
}

func (o *uiOperator) reconcileOne(ctx context.Context, a uiApp) (bool, error) {
	apps := o.c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(a.namespace)
	app, err := apps.Get(ctx, a.name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	tag, _, _ := unstructured.NestedString(app.Object, "spec", "image", "tag")
	replicas, _, _ := unstructured.NestedInt64(app.Object, "spec", "replicas")
	syncAsked := app.GetAnnotations()[projection.AnnotationSyncRequestedAt]
	cs := o.c.Clientset()
	owner := []metav1.OwnerReference{{APIVersion: "hanzo.ai/v1", Kind: "App", Name: a.name, UID: app.GetUID(), Controller: ptr(true)}}
	sel := map[string]string{"app.kubernetes.io/instance": a.name}
	d, err := cs.AppsV1().Deployments(a.namespace).Get(ctx, a.name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r := int32(replicas)
		d = &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: a.name, Namespace: a.namespace, Labels: sel, OwnerReferences: owner,
				Annotations: map[string]string{syncedForAnnotation: syncAsked}},
			Spec: appsv1.DeploymentSpec{Replicas: &r, Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: a.name, Image: "ghcr.io/hanzoai/" + a.name + ":" + tag,
						Ports: []corev1.ContainerPort{{ContainerPort: 8080}}}}}}},
		}
		if _, err := cs.AppsV1().Deployments(a.namespace).Create(ctx, d, metav1.CreateOptions{}); err != nil {
			return false, err
		}
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: a.name, Namespace: a.namespace, Labels: sel, OwnerReferences: owner},
			Spec: corev1.ServiceSpec{Selector: sel, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
		if _, err := cs.CoreV1().Services(a.namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return false, err
		}
		return false, nil
	case err != nil:
		return false, err
	}
	image := "ghcr.io/hanzoai/" + a.name + ":" + tag
	if d.Spec.Template.Spec.Containers[0].Image != image && (!a.manual || !o.holding.Load() || d.Annotations[syncedForAnnotation] != syncAsked) {
		d.Spec.Template.Spec.Containers[0].Image = image
		if d.Annotations == nil {
			d.Annotations = map[string]string{}
		}
		d.Annotations[syncedForAnnotation] = syncAsked
		_, err := cs.AppsV1().Deployments(a.namespace).Update(ctx, d, metav1.UpdateOptions{})
		if apierrors.IsConflict(err) {
			err = nil
		}
		return false, err
	}
	phase := "Running"
	if replicas > 0 && d.Status.ReadyReplicas == 0 && d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas > 0 {
		phase = "Degraded"
	}
	status := map[string]any{"phase": phase, "readyReplicas": int64(d.Status.ReadyReplicas), "availableReplicas": int64(d.Status.AvailableReplicas),
		"observedGeneration": app.GetGeneration()}
	if !equalStatus(app.Object["status"], status) {
		app.Object["status"] = status
		if _, err := apps.UpdateStatus(ctx, app, metav1.UpdateOptions{}); err != nil && !apierrors.IsConflict(err) {
			return false, err
		}
		return false, nil
	}
	rolled := d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == d.Status.Replicas
	return rolled, nil
}

func equalStatus(a any, b map[string]any) bool {
	m, ok := a.(map[string]any)
	if !ok {
		return false
	}
	return fmt.Sprint(m) == fmt.Sprint(b)
}

func ptr[T any](v T) *T { return &v }

// run reconciles every 200 ms until ctx ends.
func (o *uiOperator) run(ctx context.Context) {
	for ctx.Err() == nil {
		_, _ = o.reconcile(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startUIFleet creates uiFleet and rolls each App through its tags.
func startUIFleet(t *testing.T, c *clustertest.Cluster) *uiOperator {
	t.Helper()
	o := &uiOperator{t: t, c: c}
	for _, ns := range []string{"hanzo", "tenant-acme"} {
		if _, err := c.Clientset().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	depth := 0
	for _, a := range uiFleet {
		depth = max(depth, len(a.tags))
	}
	for step := range depth {
		for _, a := range uiFleet {
			if step < len(a.tags) {
				o.apply(a, a.tags[step])
			}
		}
		c.WaitFor(t, 90*time.Second, func() (bool, error) { return o.reconcile(t.Context()) })
	}
	o.holding.Store(true)
	for _, a := range uiFleet {
		if a.declared != "" {
			o.apply(a, a.declared)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); o.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return o
}

// TestStockArgoUI drives the stock Argo CD web UI, built from its sources
// and served by a static file server in front of deployd, against a real
// API server with controllers, signed in through a real identity provider
// (Hydra): a member of acme, then a SuperAdmin, visit every panel; the
// SuperAdmin's writes take effect in the cluster, the member's are refused
// with Argo's own error toast and change nothing.
func TestStockArgoUI(t *testing.T) {
	dir := argoUIDir(t)
	requireChromium(t)
	c := clustertest.Start(t, clustertest.WithControllers())
	startUIFleet(t, c)

	h := hydratest.Start(t)
	front, setBackend := startArgoFront(t, dir)
	client := h.CreateClient(t, hydratest.ClientOptions{RedirectURIs: []string{front.URL + auth.CallbackPath}})
	env := startPlaneWith(t, c.Config, func(pc *planeConfig) {
		pc.Auth = auth.Config{Issuer: h.Issuer, ClientID: client.ID, ClientSecret: client.Secret, PublicURL: front.URL,
			CookieKey: bytes.Repeat([]byte{7}, 32)}
	})
	setBackend(env.URL)
	env.waitReady(t, 30*time.Second)

	shots := shotsDir(t, "deployd-argoui-")
	ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
	defer cancel()
	// Each visit loads the page afresh, as a bookmark does. Chromium would
	// keep every page left in its back/forward cache with its two streams
	// open, and over HTTP/1.1 it opens six connections to a host: the
	// seventh page would wait for a slot.
	b := newBrowser(t, ctx, chromedp.Flag("disable-features", "BackForwardCache"))
	uiDebug(t, b)

	// A member of acme: acme's two apps, every panel, and writes refused.
	h.SetIdentity(hydratest.Identity{Subject: acmeMember.Subject, Claims: acmeMember.Extra})
	u := &uiTour{t: t, b: b, front: front, c: c, shots: shots, who: "alice",
		refused: func(a apiCall) bool { return a.status == http.StatusForbidden && a.method == http.MethodPost }}
	u.signIn()
	u.tourList(2, map[string]int{"proj=default": 2, "cluster=" + url.QueryEscape("in-cluster (https://kubernetes.default.svc)"): 2,
		"namespace=tenant-acme": 2, "labels=" + url.QueryEscape(projection.LabelOrg+"=acme"): 2, "sync=OutOfSync": 1, "health=Suspended": 1})
	u.tourApp("tenant-acme", "web")
	before := u.clusterState("tenant-acme", "web")
	u.sync("tenant-acme", "web", "v3.2.0", false)
	u.rollback("tenant-acme", "web", "v3.0.0", false)
	u.restart("tenant-acme", "web", false)
	if after := u.clusterState("tenant-acme", "web"); after != before {
		t.Errorf("the member's refused writes changed the cluster: %s → %s", before, after)
	}
	u.tourSettings()
	u.signOut()

	// A SuperAdmin: the whole fleet, and writes that take effect.
	h.SetIdentity(hydratest.Identity{Subject: admin.Subject, Claims: admin.Extra})
	u.who, u.refused = "root", nil
	u.signIn()
	u.tourList(4, map[string]int{"proj=default": 4, "cluster=" + url.QueryEscape("in-cluster (https://kubernetes.default.svc)"): 4,
		"namespace=tenant-acme": 2, "labels=" + url.QueryEscape(projection.LabelOrg+"=acme"): 2, "sync=OutOfSync": 1,
		"health=Degraded": 1, "health=Suspended": 1, "health=Healthy": 2})
	u.tourApp("hanzo", "api")
	u.visit("APP DIFF of the out-of-sync app", "/applications/tenant-acme/web?view=tree&node="+url.QueryEscape("argoproj.io/Application/tenant-acme/web/0")+"&tab=diff",
		`!!document.querySelector('.sliding-panel--opened .tabs') && document.body.innerText.includes('v3.2.0')`)
	u.sync("tenant-acme", "web", "v3.2.0", true)
	u.restart("hanzo", "api", true)
	u.rollback("hanzo", "api", "v1.0.0", true)
	u.refresh("hanzo", "worker")
	u.tourSettings()
	b.checkConsole()
}

// uiDebug prints what Chromium sends and receives when
// DEPLOYD_ARGOUI_DEBUG is set (the front prints what it passes on).
func uiDebug(t *testing.T, b *browser) {
	if os.Getenv("DEPLOYD_ARGOUI_DEBUG") == "" {
		return
	}
	start := time.Now()
	chromedp.Listen(b.ctx, func(ev any) {
		switch e := ev.(type) {
		case *network.EventRequestWillBeSent:
			fmt.Printf("%6.2fs chrome: send %s %s\n", time.Since(start).Seconds(), e.RequestID, e.Request.URL)
		case *network.EventResponseReceived:
			fmt.Printf("%6.2fs chrome: resp %s %d\n", time.Since(start).Seconds(), e.RequestID, e.Response.Status)
		case *network.EventLoadingFailed:
			fmt.Printf("%6.2fs chrome: fail %s %s\n", time.Since(start).Seconds(), e.RequestID, e.ErrorText)
		}
	})
	if _, err := chromedp.Call(b.ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
}

// uiTour visits the stock UI's pages as one user, failing on Argo's error
// page, an error toast it did not expect, or a failed call to deployd.
type uiTour struct {
	t     *testing.T
	b     *browser
	front *argoFront
	c     *clustertest.Cluster
	shots string
	who   string
	n     int
	// refused says which failed calls are expected (a member's writes).
	refused func(apiCall) bool
}

const uiBroken = `document.body.innerText.includes('Something went wrong')`

// signIn goes through Argo's login page: its SSO button, /auth/login,
// the identity provider and back to the applications list.
func (u *uiTour) signIn() {
	u.t.Helper()
	u.b.do("open the UI", chromedp.Navigate(u.front.URL+"/applications"))
	u.b.waitFor("the login page", `!!document.querySelector('.login__box_saml a')`, 20*time.Second)
	u.b.click("log in via SSO", ".login__box_saml a button")
	u.b.waitFor("the applications list", `location.pathname === '/applications' && document.querySelectorAll('.applications-list__entry').length > 0`, 30*time.Second)
	u.visit("User Info", "/user-info", fmt.Sprintf(`document.body.innerText.includes(%q)`, u.who))
}

// signOut is the page's "Log out" (/auth/logout): back at the login page.
func (u *uiTour) signOut() {
	u.t.Helper()
	u.visit("the list before signing out", "/applications", `!!document.querySelector('.login-logout-button')`)
	u.b.click("Log out", ".login-logout-button")
	u.b.waitFor("the login page after signing out", `!!document.querySelector('.login__box_saml a')`, 20*time.Second)
	if r := eval[int](u.b, `fetch('/api/v1/applications').then(r => r.status)`); r != http.StatusUnauthorized {
		u.t.Errorf("%s: the list after signing out answered %d, want 401", u.who, r)
	}
}

// visit opens a URL of the UI and waits for ready; then checks the page.
func (u *uiTour) visit(what, path, ready string) {
	u.t.Helper()
	mark := u.front.mark()
	eval[bool](u.b, `(localStorage.clear(), true)`) // Argo keeps the last filters there
	u.b.do("open "+what, chromedp.Navigate(u.front.URL+path))
	u.await(what, ready, mark, false)
}

// await waits for ready after an action, then checks the page and the
// calls since mark; toast says an error toast is expected.
func (u *uiTour) await(what, ready string, mark int, toast bool) {
	u.t.Helper()
	u.n++
	// A screenshot is taken only of a page that failed a check: a full-page
	// capture relays out and paints the whole page, and the tour has some
	// seventy pages.
	shot := func() string { return u.b.screenshot(u.shots, fmt.Sprintf("%s-%02d.png", u.who, u.n)) }
	if err := u.b.poll(ready+` || `+uiBroken, 20*time.Second); err != nil {
		u.t.Errorf("%s (%s): %s: not shown: %v (%s)\n%s\ncalls: %v", u.who, what, ready, err, shot(), u.b.describe(), u.front.since(mark))
	}
	if eval[bool](u.b, uiBroken) {
		u.t.Errorf("%s (%s): Argo's error page (%s)\n%s", u.who, what, shot(), u.b.describe())
	}
	if !toast && eval[bool](u.b, `!!document.querySelector('.Toastify__toast--error')`) {
		u.t.Errorf("%s (%s): an error toast: %s (%s)", u.who, what, eval[string](u.b, `document.querySelector('.Toastify__toast--error').innerText`), shot())
	}
	time.Sleep(300 * time.Millisecond) // the page's follow-up calls
	expected := func(c apiCall) bool { return u.podGone(c) || (u.refused != nil && u.refused(c)) }
	for _, c := range u.front.failed(mark, expected) {
		u.t.Errorf("%s (%s): %s %s answered %d", u.who, what, c.method, c.path, c.status)
	}
}

// podGone reports whether c is a page's look-up of a Pod that a roll-out
// has replaced since the page drew its tree: Argo's open panels and
// history follow the tree's pods, and a 404 for a Pod that is really gone
// is what the UI expects (it shows nothing for it). Any other failed call
// is a fault.
func (u *uiTour) podGone(c apiCall) bool {
	if c.method != http.MethodGet || c.status != http.StatusNotFound || !strings.Contains(c.path, "/resource?") || !strings.Contains(c.path, "&kind=Pod&") {
		return false
	}
	q, _ := url.ParseQuery(c.path[strings.Index(c.path, "?")+1:])
	if ns := q.Get("namespace"); ns == "" || strings.Contains(ns, ".") {
		return false // not a namespace of the tour's cluster: nothing to excuse it by
	}
	_, err := u.c.Clientset().CoreV1().Pods(q.Get("namespace")).Get(u.t.Context(), q.Get("resourceName"), metav1.GetOptions{})
	return apierrors.IsNotFound(err)
}

// editorShows is a predicate: the open panel's editor shows text (Monaco
// writes spaces as no-break spaces).
func editorShows(text string) string {
	return fmt.Sprintf(`[...document.querySelectorAll('.sliding-panel--opened .monaco-editor .view-lines')].some(e => e.textContent.replace(/\u00a0/g, ' ').includes(%q))`, text)
}

// clickText clicks the element matching sel whose text starts with text.
func (u *uiTour) clickText(what, sel, text string) {
	u.t.Helper()
	find := fmt.Sprintf(`[...document.querySelectorAll(%q)].find(e => e.innerText.trim().toLowerCase().startsWith(%q))`, sel, strings.ToLower(text))
	u.b.waitFor(what, "!!"+find, 10*time.Second)
	eval[bool](u.b, "("+find+".click(), true)")
}

func (u *uiTour) tourList(total int, filters map[string]int) {
	u.t.Helper()
	entries := `document.querySelectorAll('.applications-list__entry').length`
	for _, view := range []string{"tiles", "list"} {
		u.visit("the list in "+view, "/applications?view="+view, fmt.Sprintf(`%s === %d`, entries, total))
	}
	u.visit("the list's summary", "/applications?view=summary", `!!document.querySelector('.applications-list__summary')`)
	for _, q := range slices.Sorted(maps.Keys(filters)) {
		u.visit("the list filtered by "+q, "/applications?view=tiles&"+q, fmt.Sprintf(`%s === %d`, entries, filters[q]))
	}
}

func (u *uiTour) tourApp(namespace, name string) {
	u.t.Helper()
	base := "/applications/" + namespace + "/" + name
	panel := `!!document.querySelector('.sliding-panel--opened .tabs')`
	u.visit(name+"'s tree", base+"?view=tree", `document.querySelectorAll('.application-resource-tree__node').length >= 5`)
	u.visit(name+"'s network view", base+"?view=network", `document.querySelectorAll('.application-resource-tree__node').length >= 2`)
	u.visit(name+"'s list view", base+"?view=list", `document.querySelectorAll('.application-resource-list .argo-table-list__row').length >= 4`)
	pod := "/Pod/" + namespace + "/" + u.podOf(namespace, name) + "/0"
	// A Pod's tabs are SUMMARY (with its LIVE MANIFEST), EVENTS and LOGS;
	// DIFF is a managed object's: the Deployment's.
	for tab, ready := range map[string]string{
		"summary": panel + ` && document.body.innerText.includes('CONTAINER STATE') && ` + editorShows("kind: Pod"),
		"events":  panel,
		"logs":    panel + ` && document.body.innerText.includes('fake kubelet: image')`,
	} {
		u.visit("a Pod's "+tab, base+"?view=tree&node="+url.QueryEscape(pod)+"&tab="+tab, ready)
	}
	deploy := "apps/Deployment/" + namespace + "/" + name + "/0"
	u.visit("the Deployment's SUMMARY", base+"?view=tree&node="+url.QueryEscape(deploy)+"&tab=summary", panel+` && `+editorShows("kind: Deployment"))
	mark := u.front.mark()
	u.clickText("the Deployment's DIFF", ".sliding-panel--opened .tabs__nav-wrapper a", "Diff")
	u.await("the Deployment's DIFF", `!!document.querySelector('.sliding-panel--opened .application-resources-diff')`, mark, false)
	appNode := "argoproj.io/Application/" + namespace + "/" + name + "/0"
	for _, tab := range []string{"summary", "parameters", "manifest", "event"} {
		u.visit("DETAILS "+tab, base+"?view=tree&node="+url.QueryEscape(appNode)+"&tab="+tab, panel)
	}
	u.visit("SYNC STATUS", base+"?view=tree&operation=true", `document.querySelector('.sliding-panel--opened')?.innerText.includes('INITIATED BY')`)
	u.visit("HISTORY AND ROLLBACK", base+"?view=tree&rollback=0", `document.querySelectorAll('.application-deployment-history__item').length >= 2`)
	u.visit("the sync dialog", base+"?view=tree&deploy=all", `document.body.innerText.includes('SYNCHRONIZE')`)
}

func (u *uiTour) tourSettings() {
	u.t.Helper()
	u.visit("Settings", "/settings", `document.body.innerText.includes('Clusters')`)
	u.visit("Settings → Clusters", "/settings/clusters", `document.body.innerText.includes('in-cluster')`)
	u.visit("Settings → Projects", "/settings/projects", `document.body.innerText.includes('default')`)
	u.visit("User Info", "/user-info", fmt.Sprintf(`document.body.innerText.includes(%q)`, u.who))
}

func (u *uiTour) podOf(namespace, name string) string {
	u.t.Helper()
	pods, err := u.c.Clientset().CoreV1().Pods(namespace).List(u.t.Context(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name})
	if err != nil || len(pods.Items) == 0 {
		u.t.Fatalf("the pods of %s: %v", name, err)
	}
	return pods.Items[0].Name
}

// clusterState is what the writes change: the App's tag and annotations,
// and its Deployment's image and template annotations.
func (u *uiTour) clusterState(namespace, name string) string {
	u.t.Helper()
	app, err := u.c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(namespace).Get(u.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		u.t.Fatal(err)
	}
	d, err := u.c.Clientset().AppsV1().Deployments(namespace).Get(u.t.Context(), name, metav1.GetOptions{})
	if err != nil {
		u.t.Fatal(err)
	}
	tag, _, _ := unstructured.NestedString(app.Object, "spec", "image", "tag")
	return fmt.Sprintf("App tag %s %v; Deployment %s %v", tag, app.GetAnnotations(), d.Spec.Template.Spec.Containers[0].Image, d.Spec.Template.Annotations)
}

// expectWrite waits for the write's outcome: a change in the cluster, or
// for a member Argo's error toast and a 403.
func (u *uiTour) expectWrite(what string, mark int, allowed bool, done func() (bool, error)) {
	u.t.Helper()
	if allowed {
		u.await(what, `!document.querySelector('.popup-container')`, mark, false)
		u.c.WaitFor(u.t, 90*time.Second, done)
		return
	}
	u.await(what, `!!document.querySelector('.Toastify__toast--error')`, mark, true)
	if !slices.ContainsFunc(u.front.since(mark), func(c apiCall) bool { return c.method == http.MethodPost && c.status == http.StatusForbidden }) {
		u.t.Errorf("%s (%s): no write was refused: %v", u.who, what, u.front.since(mark))
	}
}

// sync opens SYNC and presses SYNCHRONIZE; the operator then rolls the
// declared tag out.
func (u *uiTour) sync(namespace, name, declared string, allowed bool) {
	u.t.Helper()
	u.visit("SYNC of "+name, "/applications/"+namespace+"/"+name+"?view=tree&deploy=all", `document.body.innerText.includes('SYNCHRONIZE')`)
	mark := u.front.mark()
	u.clickText("SYNCHRONIZE", "button", "Synchronize")
	u.expectWrite("SYNC of "+name, mark, allowed, func() (bool, error) {
		return strings.Contains(u.clusterState(namespace, name), "Deployment ghcr.io/hanzoai/"+name+":"+declared+" "), nil
	})
	if allowed {
		u.visit(name+" after its sync", "/applications/"+namespace+"/"+name+"?view=tree", `document.querySelector('.application-status-panel')?.innerText.includes('Synced')`)
	}
}

// rollback opens HISTORY AND ROLLBACK and rolls back to the entry of tag,
// through Argo's confirm dialog.
func (u *uiTour) rollback(namespace, name, tag string, allowed bool) {
	u.t.Helper()
	u.visit("HISTORY of "+name, "/applications/"+namespace+"/"+name+"?view=tree&rollback=0", `document.querySelectorAll('.application-deployment-history__item').length >= 2`)
	item := fmt.Sprintf(`[...document.querySelectorAll('.application-deployment-history__item')].find(e => e.innerText.includes(%q))`, tag)
	u.b.waitFor("the history entry of "+tag, "!!"+item, 10*time.Second)
	eval[bool](u.b, "("+item+".querySelector('.argo-dropdown__anchor').click(), true)")
	u.clickText("Rollback", ".argo-dropdown__content.opened li", "Rollback")
	u.b.waitFor("Argo's confirm dialog", `!!document.querySelector('.popup-container') && document.querySelector('.popup-container').innerText.includes('rollback')`, 10*time.Second)
	mark := u.front.mark()
	u.b.click("OK", `.popup-container button[qe-id="argo-popup-ok-button"]`)
	u.expectWrite("ROLLBACK of "+name+" to "+tag, mark, allowed, func() (bool, error) {
		return strings.Contains(u.clusterState(namespace, name), "App tag "+tag+" "), nil
	})
}

// restart runs the restart action of the app's Deployment from its node's
// menu, through Argo's prompt.
func (u *uiTour) restart(namespace, name string, allowed bool) {
	u.t.Helper()
	node := "apps/Deployment/" + namespace + "/" + name + "/0"
	u.visit("the Deployment of "+name, "/applications/"+namespace+"/"+name+"?view=tree&node="+url.QueryEscape(node)+"&tab=summary",
		`!!document.querySelector('.resource-details__header .argo-dropdown__anchor')`)
	u.b.click("the Deployment's actions", ".resource-details__header .argo-dropdown__anchor")
	if !allowed {
		// deployd offers the action disabled to whom it would refuse.
		u.b.waitFor("the Restart action, disabled", `[...document.querySelectorAll('li.application-details__action-menu')].some(e => e.innerText.trim().startsWith('Restart') && e.classList.contains('disabled'))`, 10*time.Second)
		return
	}
	u.clickText("Restart", "li.application-details__action-menu", "Restart")
	u.b.waitFor("Argo's prompt", `!!document.querySelector('.popup-container button[qe-id="prompt-popup-ok-button"]')`, 10*time.Second)
	mark := u.front.mark()
	u.b.click("OK", `.popup-container button[qe-id="prompt-popup-ok-button"]`)
	u.expectWrite("the restart of "+name, mark, allowed, func() (bool, error) {
		return strings.Contains(u.clusterState(namespace, name), projection.AnnotationRestartedAt), nil
	})
}

// refresh presses the app's REFRESH.
func (u *uiTour) refresh(namespace, name string) {
	u.t.Helper()
	u.visit(name+"'s page", "/applications/"+namespace+"/"+name+"?view=tree", `document.querySelectorAll('.application-resource-tree__node').length >= 2`)
	mark := u.front.mark()
	u.clickText("REFRESH", "button", "Refresh")
	u.await("REFRESH of "+name, `true`, mark, false)
	if !slices.ContainsFunc(u.front.since(mark), func(c apiCall) bool { return strings.Contains(c.path, "refresh=normal") && c.status == http.StatusOK }) {
		u.t.Errorf("%s: REFRESH made no refresh call: %v", u.who, u.front.since(mark))
	}
}

// TestStockArgoUIClusters drives the stock Argo CD UI's CLUSTERS filter
// against deployd reading two real clusters (each its own kube-apiserver
// and etcd): the filter offers each cluster as Argo names it
// ("<name> (<server>)", from /api/v1/clusters); picking one shows exactly
// that cluster's Apps (hanzo/iam, in both, once: the chosen cluster's) and
// puts the choice in the URL, the other choice the other cluster's Apps;
// an App of the second cluster opens with its destination cluster. No
// call to deployd fails.
func TestStockArgoUIClusters(t *testing.T) {
	dir := argoUIDir(t)
	requireChromium(t)
	front, setBackend := startArgoFront(t, dir)
	_, staging, m, d := twoClusterFleet(t, "DEPLOY_PUBLIC_URL="+front.URL)
	setBackend(d.base)

	shots := shotsDir(t, "deployd-argoui-clusters-")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	b := newBrowser(t, ctx, chromedp.Flag("disable-features", "BackForwardCache"))
	uiDebug(t, b)
	home, second := "in-cluster (https://kubernetes.default.svc)", "staging ("+staging.URL()+")"

	m.QueueUser(admin)
	u := &uiTour{t: t, b: b, front: front, shots: shots, who: "root"}
	u.signIn()
	u.visit("the list of both clusters", "/applications?view=tiles", `document.querySelectorAll('.applications-list__entry').length === 5`)
	if got := u.clusterOptions(); !slices.Equal(got, []string{home, second}) {
		t.Errorf("the CLUSTERS filter offers %q, want %q", got, []string{home, second})
	}
	u.pickCluster(second, []string{"hanzo.staging/iam", "tenant-acme.staging/api", "tenant-globex.staging/shop"})
	u.clearClusters(5)
	u.pickCluster(home, []string{"hanzo/iam", "tenant-acme/web"})
	// staging's iam: its tree (the App and its Deployment) and its summary,
	// whose destination the UI asks deployd for by the cluster's server.
	mark := u.front.mark()
	appNode := "argoproj.io/Application/hanzo.staging/iam/0"
	u.visit("staging's iam's summary", "/applications/hanzo.staging/iam?view=tree&node="+url.QueryEscape(appNode)+"&tab=summary",
		fmt.Sprintf(`document.querySelectorAll('.application-resource-tree__node').length >= 2 && document.querySelector('.sliding-panel--opened .application-summary')?.innerText.includes(%s)`, js(second)))
	if !slices.ContainsFunc(u.front.since(mark), func(c apiCall) bool {
		p, _ := url.PathUnescape(c.path)
		return strings.HasPrefix(p, "/api/v1/clusters/"+staging.URL()+"?") && c.status == http.StatusOK
	}) {
		t.Errorf("the summary of staging's iam did not read its cluster: %v", u.front.since(mark))
	}
	b.checkConsole()
}

// clustersFilter is an expression: the list's CLUSTERS filter.
const clustersFilter = `[...document.querySelectorAll('.filter')].find(f => f.querySelector('.filter__header__label')?.textContent === 'CLUSTERS')`

// openMenu is an expression: the items of the autocomplete menu showing.
const openMenu = `[...document.querySelectorAll('.autocomplete__items')].filter(m => m.style.visibility === 'visible').flatMap(m => [...m.querySelectorAll('.autocomplete__items__item')])`

// clusterOptions opens the CLUSTERS filter's menu (a click in its field)
// and answers what it offers, sorted.
func (u *uiTour) clusterOptions() []string {
	u.t.Helper()
	// The menu opens as the field takes the focus: a field still focused
	// from the last pick is left first, as a click elsewhere does.
	eval[bool](u.b, `(document.activeElement?.blur(), true)`)
	u.b.click("the CLUSTERS filter's field", `.filter input.autocomplete__input[placeholder="CLUSTERS"]`)
	u.b.waitFor("the CLUSTERS filter's menu", openMenu+`.length > 0`, 10*time.Second)
	got := eval[[]string](u.b, openMenu+`.map(i => i.textContent)`)
	slices.Sort(got)
	return got
}

// pickCluster picks label in the CLUSTERS filter as a user does (a click
// in its field, then on the item) and checks the list shows exactly want
// (namespace/name, sorted) and the URL carries the choice.
func (u *uiTour) pickCluster(label string, want []string) {
	u.t.Helper()
	if opts := u.clusterOptions(); !slices.Contains(opts, label) {
		u.t.Fatalf("%s: the CLUSTERS filter does not offer %q: %q", u.who, label, opts)
	}
	mark := u.front.mark()
	eval[bool](u.b, fmt.Sprintf(`(%s.find(i => i.textContent === %s).click(), true)`, openMenu, js(label)))
	u.await("the list filtered by "+label, fmt.Sprintf(`document.querySelectorAll('.applications-list__entry').length === %d && new URLSearchParams(location.search).get('cluster') === %s`,
		len(want), js(label)), mark, false)
	if got := u.listedApps(); !slices.Equal(got, want) {
		u.t.Errorf("%s: with the cluster %s the list shows %v, want %v", u.who, label, got, want)
	}
}

// clearClusters presses the CLUSTERS filter's CLEAR: the list shows all n
// Apps again.
func (u *uiTour) clearClusters(n int) {
	u.t.Helper()
	mark := u.front.mark()
	eval[bool](u.b, `(`+clustersFilter+`.querySelector('.filter__header button').click(), true)`)
	u.await("the list unfiltered", fmt.Sprintf(`document.querySelectorAll('.applications-list__entry').length === %d && !new URLSearchParams(location.search).get('cluster')`, n), mark, false)
}

// listedApps are the Apps the list's tiles link to, namespace/name, sorted.
func (u *uiTour) listedApps() []string {
	u.t.Helper()
	got := eval[[]string](u.b, `[...document.querySelectorAll('.applications-list__entry a.applications-tiles__wrapper')].map(a => decodeURIComponent(new URL(a.href).pathname).replace(/^\/applications\//, ''))`)
	slices.Sort(got)
	return got
}
