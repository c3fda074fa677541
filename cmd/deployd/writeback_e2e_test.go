package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/auth/authtest"
	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

const wbWeb = `# the storefront
apiVersion: hanzo.ai/v1
kind: App
metadata:
  name: %s   # keep this name
  namespace: hanzo
spec:
  image:
    repository: ghcr.io/hanzoai/web
    tag: "v1.2.0"   # pinned by hand
  replicas: 1
`

var ada = authtest.User{Subject: "u-ada", Extra: map[string]any{"preferred_username": "ada", "name": "Ada Lovelace", "email": "ada@example.com", "owner": "admin"}}

func bareGit(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// oneLine checks that commit changed exactly one line of file since from.
func oneLine(t *testing.T, bare, from, commit, file, want string) {
	t.Helper()
	if files := bareGit(t, bare, "diff", "--name-only", from, commit); files != file {
		t.Fatalf("the commit touched %q, want only %s", files, file)
	}
	var minus, plus []string
	for _, l := range strings.Split(bareGit(t, bare, "diff", "--unified=0", from, commit), "\n") {
		switch {
		case strings.HasPrefix(l, "---"), strings.HasPrefix(l, "+++"):
		case strings.HasPrefix(l, "-"):
			minus = append(minus, l)
		case strings.HasPrefix(l, "+"):
			plus = append(plus, l)
		}
	}
	if len(minus) != 1 || len(plus) != 1 || plus[0] != "+"+want {
		t.Fatalf("the commit changed -%q +%q, want one line becoming %q", minus, plus, want)
	}
}

func newPlaneEngine(t *testing.T, c *clustertest.Cluster, repoURL, instance string, push bool) *engine.Engine {
	t.Helper()
	cfg := engine.Defaults()
	cfg.Repo, cfg.Path, cfg.Instance, cfg.Interval, cfg.Push = repoURL, "crs", instance, 0, push
	cfg.CacheDir = filepath.Join(t.TempDir(), "cache")
	eng, err := engine.New(cfg, c.Config, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := eng.Reconcile(t.Context(), gitops.TriggerRequest, false); err != nil {
		t.Fatal(err)
	}
	return eng
}

func liveTag(t *testing.T, c *clustertest.Cluster, ns, name string) string {
	t.Helper()
	u, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tag, _, _ := unstructured.NestedString(u.Object, "spec", "image", "tag")
	return tag
}

// historyOf is an Application's status.history as these tests read it.
type historyOf struct {
	Status struct {
		History []struct {
			ID       int64  `json:"id"`
			Revision string `json:"revision"`
			Commit   string `json:"commit"`
		} `json:"history"`
	} `json:"status"`
}

// The rollback and release routes with the engine on: commits pushed over
// smart HTTP to a real git server, reconciled into a real kube-apiserver.
func TestWriteBackRoutesE2E(t *testing.T) {
	c := clustertest.Start(t)
	srv := enginetest.NewServer(t)
	c.Apply(t, clustertest.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: hanzo}\n"),
		clustertest.Object(t, "apiVersion: hanzo.ai/v1\nkind: App\nmetadata: {name: legacy, namespace: hanzo}\nspec: {image: {repository: ghcr.io/hanzoai/legacy, tag: v1.0.0}}\n"))
	repo := srv.NewRepo(t, "fleet")
	first := repo.Commit(t, "fleet", map[string]string{"crs/web.yaml": strings.Replace(wbWeb, "%s", "web", 1)})
	offRepo := srv.NewRepo(t, "offfleet")
	offRepo.Commit(t, "fleet", map[string]string{"crs/pinned.yaml": strings.Replace(wbWeb, "%s", "pinned", 1)})

	on := newPlaneEngine(t, c, repo.URL, "wbon", true)
	env := startPlaneWith(t, c.Config, func(pc *planeConfig) { pc.Engine = on })
	env.waitReady(t, 30*time.Second)
	c.WaitFor(t, 30*time.Second, func() (bool, error) {
		return env.p.store.Snapshot().Get("hanzo", "web") != nil && env.p.store.Snapshot().Get("hanzo", "legacy") != nil, nil
	})
	tok := env.token(t, ada, time.Hour)

	// Release: a commit of one line, authored by the caller, reconciled.
	r := env.send(t, nil, http.MethodPost, "/v1/paas/apps/web/release?env=main", tok, `{"tag":"v1.3.0"}`)
	var got struct {
		Commit string `json:"commit"`
		Status struct {
			History []map[string]any `json:"history"`
		} `json:"status"`
	}
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &got) != nil || got.Commit == "" {
		t.Fatalf("release: %d %s", r.code, r.body)
	}
	release := got.Commit
	if head := repo.Head(t); head != release {
		t.Fatalf("the ref is at %s, the answer names %s", head, release)
	}
	oneLine(t, repo.Bare, first, release, "crs/web.yaml", `    tag: "v1.3.0"   # pinned by hand`)
	if meta := bareGit(t, repo.Bare, "log", "-1", "--format=%an <%ae>|%cn|%s", release); meta != "Ada Lovelace <ada@example.com>|deployd|deploy: release hanzo/web v1.3.0" {
		t.Fatalf("release commit %q", meta)
	}
	if tag := liveTag(t, c, "hanzo", "web"); tag != "v1.3.0" {
		t.Fatalf("the cluster carries %q after the release", tag)
	}

	// Rollback by tag, to a tag the file declared in git.
	r = env.send(t, nil, http.MethodPost, "/v1/deploy/applications/web/rollback", tok, `{"tag":"v1.2.0"}`)
	got.Commit = ""
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &got) != nil || got.Commit == "" || got.Commit != repo.Head(t) {
		t.Fatalf("rollback: %d %s", r.code, r.body)
	}
	rollback := got.Commit
	oneLine(t, repo.Bare, release, rollback, "crs/web.yaml", `    tag: "v1.2.0"   # pinned by hand`)
	if s := bareGit(t, repo.Bare, "log", "-1", "--format=%B", rollback); !strings.HasPrefix(s, "deploy: roll back hanzo/web to v1.2.0\n\nRequest-Id: "+r.header.Get("X-Request-Id")) {
		t.Fatalf("rollback message %q (request id %q)", s, r.header.Get("X-Request-Id"))
	}
	if tag := liveTag(t, c, "hanzo", "web"); tag != "v1.2.0" {
		t.Fatalf("the cluster carries %q after the rollback", tag)
	}
	// The declared tag again: 200, no commit.
	r = env.send(t, nil, http.MethodPost, "/v1/deploy/applications/web/rollback", tok, `{"tag":"v1.2.0"}`)
	if r.code != http.StatusOK || strings.Contains(r.body, `"commit"`) || repo.Head(t) != rollback {
		t.Fatalf("the declared tag: %d, head %s", r.code, repo.Head(t))
	}

	// History from git, newest first; the metadata of each commit.
	r = env.send(t, nil, http.MethodGet, "/v1/deploy/applications/web", tok, "")
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &got) != nil || len(got.Status.History) != 3 {
		t.Fatalf("application: %d %s", r.code, r.body)
	}
	for i, want := range []struct{ commit, rev, author, msg string }{
		{rollback, "v1.2.0", "Ada Lovelace <ada@example.com>", "deploy: roll back hanzo/web to v1.2.0"},
		{release, "v1.3.0", "Ada Lovelace <ada@example.com>", "deploy: release hanzo/web v1.3.0"},
		{first, "v1.2.0", "test <test@example.com>", "fleet"},
	} {
		h := got.Status.History[i]
		if h["commit"] != want.commit || h["revision"] != want.rev || h["author"] != want.author || !strings.HasPrefix(h["message"].(string), want.msg) {
			t.Fatalf("history[%d] = %v, want %+v", i, h, want)
		}
	}
	r = env.send(t, nil, http.MethodGet, "/v1/deploy/applications/web/revisions/"+release+"/metadata", tok, "")
	if r.code != http.StatusOK || !strings.Contains(r.body, `"author":"Ada Lovelace \u003cada@example.com\u003e"`) ||
		!strings.Contains(r.body, `"message":"deploy: release hanzo/web v1.3.0`) || !strings.Contains(r.body, `"tags":["v1.3.0"]`) {
		t.Fatalf("revision metadata: %d %s", r.code, r.body)
	}

	// Refusals: each with its status, and no commit.
	head := repo.Head(t)
	for _, x := range []struct {
		path, token, body string
		code              int
	}{
		{"/v1/paas/apps/web/release?env=main", tok, `{"tag":"latest"}`, 400},
		{"/v1/paas/apps/web/release?env=main", tok, `{"tag":"v1"}`, 400},
		{"/v1/paas/apps/web/release?env=main", tok, `{"tag":"v1.2.3\nSigned-off-by: x"}`, 400},
		{"/v1/paas/apps/web/release?env=main", tok, `{"tag":"v1.4.0","extra":1}`, 400},
		{"/v1/paas/apps/web/release", tok, `{"tag":"v1.4.0"}`, 400},
		{"/v1/paas/apps/..%2F..%2Fcrs%2Fweb/release?env=main", tok, `{"tag":"v1.4.0"}`, 400},
		{"/v1/paas/apps/web/release?env=main", env.token(t, acmeMember, time.Hour), `{"tag":"v1.4.0"}`, 403},
		{"/v1/paas/apps/web/release?env=main", env.token(t, globexAdmin, time.Hour), `{"tag":"v1.4.0"}`, 403},
		{"/v1/paas/apps/web/release?env=main", "", `{"tag":"v1.4.0"}`, 401},
		{"/v1/paas/apps/nope/release?env=main", tok, `{"tag":"v1.4.0"}`, 404},
		{"/v1/paas/apps/web/release?env=test", tok, `{"tag":"v1.4.0"}`, 404},
		{"/v1/paas/apps/legacy/release?env=main", tok, `{"tag":"v1.4.0"}`, 409},
		{"/v1/deploy/applications/web/rollback", tok, `{"tag":"v0.0.1"}`, 400},
	} {
		r := env.send(t, nil, http.MethodPost, x.path, x.token, x.body)
		if r.code != x.code || !strings.Contains(r.body, `"message"`) {
			t.Errorf("POST %s %s: %d %s, want %d", x.path, x.body, r.code, r.body, x.code)
		}
	}
	if h := repo.Head(t); h != head {
		t.Fatalf("a refused request moved the ref to %s", h)
	}
	// An App the engine does not declare keeps the cluster patch path (its
	// own validation, no 409).
	if r := env.send(t, nil, http.MethodPost, "/v1/deploy/applications/legacy/rollback", tok, `{"tag":"v0.9.0"}`); r.code != http.StatusBadRequest || !strings.Contains(r.body, "was never released") {
		t.Fatalf("unmanaged rollback: %d %s", r.code, r.body)
	}

	// The stock UI's ROLLBACK: Argo CD's path, by the id of a history
	// entry (the release of v1.3.0), is a commit too.
	r = env.send(t, nil, http.MethodGet, "/api/v1/applications/web?appNamespace=hanzo", tok, "")
	var app historyOf
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &app) != nil {
		t.Fatalf("application: %d %s", r.code, r.body)
	}
	id := int64(-1)
	for _, h := range app.Status.History {
		if h.Commit == release {
			id = h.ID
		}
	}
	if id < 0 {
		t.Fatalf("no history entry for the release commit %s: %s", release, r.body)
	}
	r = env.send(t, nil, http.MethodPost, "/api/v1/applications/web/rollback", tok, fmt.Sprintf(`{"id":%d,"appNamespace":"hanzo","prune":false}`, id))
	got.Commit = ""
	if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &got) != nil || got.Commit == "" || got.Commit != repo.Head(t) {
		t.Fatalf("rollback by id through Argo CD's path: %d %s", r.code, r.body)
	}
	if s := bareGit(t, repo.Bare, "log", "-1", "--format=%an|%s", got.Commit); s != "Ada Lovelace|deploy: roll back hanzo/web to v1.3.0" {
		t.Fatalf("the stock UI's rollback commit: %q", s)
	}
	if tag := liveTag(t, c, "hanzo", "web"); tag != "v1.3.0" {
		t.Fatalf("the cluster carries %q after the rollback by id", tag)
	}

	// Push off, engine on: 409 naming the file, no commit.
	off := newPlaneEngine(t, c, offRepo.URL, "wboff", false)
	offEnv := startPlaneWith(t, c.Config, func(pc *planeConfig) { pc.Engine = off })
	offEnv.waitReady(t, 30*time.Second)
	c.WaitFor(t, 30*time.Second, func() (bool, error) { return offEnv.p.store.Snapshot().Get("hanzo", "pinned") != nil, nil })
	offHead := offRepo.Head(t)
	offTok := offEnv.token(t, ada, time.Hour)
	r = offEnv.send(t, nil, http.MethodPost, "/v1/deploy/applications/pinned/rollback", offTok, `{"tag":"v1.2.0"}`)
	want := `pinned\" is declared in git and reconciled with self-heal; commit the tag to ` + offRepo.URL + "/crs/pinned.yaml"
	if r.code != http.StatusConflict || !strings.Contains(r.body, want) {
		t.Fatalf("push off: %d %s, want 409 %q", r.code, r.body, want)
	}
	if r := offEnv.send(t, nil, http.MethodPost, "/v1/paas/apps/pinned/release?env=main", offTok, `{"tag":"v1.4.0"}`); r.code != http.StatusConflict || !strings.Contains(r.body, want) {
		t.Fatalf("push off release: %d %s", r.code, r.body)
	}
	if h := offRepo.Head(t); h != offHead {
		t.Fatalf("push off moved the ref to %s", h)
	}
	if tag := liveTag(t, c, "hanzo", "pinned"); tag != "v1.2.0" {
		t.Fatalf("push off changed the cluster's tag to %q", tag)
	}
}

// Rollback by id of an App the engine declares: the id names a ReplicaSet
// revision of the history joined with git by tag; the answer is a commit
// of one line, and the App in the cluster carries the tag.
func TestWriteBackRollbackByIDE2E(t *testing.T) {
	c := clustertest.Start(t, clustertest.WithControllers())
	c.Apply(t, clustertest.Object(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: hanzo}\n"))
	srv := enginetest.NewServer(t)
	repo := srv.NewRepo(t, "shopfleet")
	shop := "apiVersion: hanzo.ai/v1\nkind: App\nmetadata:\n  name: shop\n  namespace: hanzo\nspec:\n  # the storefront\n  image: {repository: ghcr.io/hanzoai/shop, tag: v1.0.0}\n  replicas: 2\n"
	repo.Commit(t, "shop", map[string]string{"crs/shop.yaml": shop})
	eng := newPlaneEngine(t, c, repo.URL, "wbid", true)
	live, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace("hanzo").Get(t.Context(), "shop", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	f := &writeFixture{t: t, c: c, uid: string(live.GetUID())}
	c.Apply(t, f.deployment("v1.0.0"))
	f.operator()
	env := startPlaneWith(t, c.Config, func(pc *planeConfig) { pc.Engine = eng })
	env.waitReady(t, 30*time.Second)
	tok := env.token(t, ada, time.Hour)
	waitHistory := func(want string) {
		t.Helper()
		c.WaitFor(t, 90*time.Second, func() (bool, error) {
			a := env.p.store.Snapshot().Get("hanzo", "shop")
			if a == nil {
				return false, nil
			}
			var got []string
			for _, h := range a.History {
				got = append(got, fmt.Sprintf("%d:%s", h.ID, h.Revision))
			}
			return strings.Join(got, ",") == want, nil
		})
	}
	waitHistory("1:v1.0.0")
	r := env.send(t, nil, http.MethodPost, "/v1/paas/apps/shop/release?env=main", tok, `{"tag":"v1.1.0"}`)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"commit":"`+repo.Head(t)+`"`) {
		t.Fatalf("release: %d %s", r.code, r.body)
	}
	f.operator()
	waitHistory("1:v1.0.0,2:v1.1.0")
	before := repo.Head(t)
	r = env.send(t, nil, http.MethodPost, "/v1/deploy/applications/shop/rollback", tok, `{"id": 1}`)
	if r.code != http.StatusOK || !strings.Contains(r.body, `"commit":"`+repo.Head(t)+`"`) || repo.Head(t) == before {
		t.Fatalf("rollback by id: %d %s", r.code, r.body)
	}
	oneLine(t, repo.Bare, before, repo.Head(t), "crs/shop.yaml", "  image: {repository: ghcr.io/hanzoai/shop, tag: v1.0.0}")
	if tag := liveTag(t, c, "hanzo", "shop"); tag != "v1.0.0" {
		t.Fatalf("the cluster carries %q after the rollback by id", tag)
	}
	// The joined history: the ReplicaSet ids sit on the newest commit of
	// their tag.
	r = env.send(t, nil, http.MethodGet, "/v1/deploy/applications/shop", tok, "")
	var got historyOf
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || len(got.Status.History) != 3 {
		t.Fatalf("application: %d %s", r.code, r.body)
	}
	// The older commit of v1.0.0, which no ReplicaSet ran, has its own id
	// (2^52 plus 48 bits of its hash), as every entry the stock UI shows.
	h := got.Status.History
	bits, _ := strconv.ParseUint(h[2].Commit[:12], 16, 64)
	if h[0].ID != 1 || h[0].Revision != "v1.0.0" || h[0].Commit != repo.Head(t) || h[1].ID != 2 || h[1].Revision != "v1.1.0" || h[2].ID != 1<<52|int64(bits) || h[2].Revision != "v1.0.0" {
		t.Fatalf("joined history %+v", h)
	}
}
