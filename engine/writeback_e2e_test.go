package engine

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/engine/enginetest"
	"github.com/hanzoai/deploy/projection"
)

const webFile = `# the storefront
apiVersion: hanzo.ai/v1
kind: App
metadata:
  name: wb-web   # keep this name
  namespace: hanzo
spec:
  image:
    repository: ghcr.io/hanzoai/web
    tag: "v1.2.0"   # pinned by hand
  replicas: 2
`

// Write-back against a real kube-apiserver and a real git server that
// takes pushes over smart HTTP.
func TestWriteBackE2E(t *testing.T) {
	c := clustertest.Start(t)
	srv := enginetest.NewServer(t)
	createNamespaces(t, c, "hanzo", "hanzo-devnet")

	t.Run("rollback commits one line", func(t *testing.T) { testWriteOneLine(t, c, srv) })
	t.Run("concurrent and racing", func(t *testing.T) { testWriteConcurrent(t, c, srv) })
	t.Run("refused", func(t *testing.T) { testWriteRefused(t, c, srv) })
	t.Run("token never logged", func(t *testing.T) { testWriteTokenNotLogged(t, c) })
}

// With a token, the write-back pushes with it; neither the log nor an
// error carries it.
func testWriteTokenNotLogged(t *testing.T, c *clustertest.Cluster) {
	const token = "s3cr3t-push-token"
	srv := enginetest.NewServer(t, enginetest.WithBasicAuth("bot", token))
	repo := srv.NewRepo(t, "wb4")
	repo.Commit(t, "fleet", map[string]string{"crs/a.yaml": appYAML("wb4-a", "hanzo", "v1.0.0")})
	var logs bytes.Buffer
	var mu sync.Mutex
	newEngine := func(secret string) *Engine {
		cfg := Defaults()
		cfg.Repo, cfg.Path, cfg.Instance, cfg.Interval, cfg.Push = repo.URL, "crs", "wb4", 0, true
		cfg.Auth, cfg.AuthUser, cfg.CacheDir = []byte(secret), "bot", t.TempDir()+"/cache"
		e, err := New(cfg, c.Config, slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, &slog.HandlerOptions{Level: slog.LevelDebug})))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	e := newEngine(token)
	if _, err := e.Reconcile(t.Context(), "request", false); err != nil {
		t.Fatal(err)
	}
	sha, err := e.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "wb4-a", Tag: "v0.9.0", Verb: "rollback", AuthorName: "a"})
	if err != nil || sha != repo.Head(t) {
		t.Fatalf("push with a token: %q, %v", sha, err)
	}
	// A wrong token: the fetch is refused, and the error names no token.
	bad := newEngine("wrong-" + token)
	bad.mu.Lock()
	bad.files = map[objKey]string{{projection.KindApp, "hanzo", "wb4-a"}: "crs/a.yaml"}
	bad.mu.Unlock()
	if _, err := bad.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "wb4-a", Tag: "v0.8.0", Verb: "rollback"}); err == nil || strings.Contains(err.Error(), token) {
		t.Fatalf("a wrong token: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !strings.Contains(logs.String(), "engine write-back") || strings.Contains(logs.String(), token) {
		t.Fatalf("the log holds the token, or no write-back line:\n%s", logs.String())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=outside", "GIT_AUTHOR_EMAIL=outside@example.com",
		"GIT_COMMITTER_NAME=outside", "GIT_COMMITTER_EMAIL=outside@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+os.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s: %v: %s", strings.Join(args, " "), err, errb.String())
	}
	return strings.TrimSpace(out.String())
}

// changedLines is the removed and added lines between two commits.
func changedLines(t *testing.T, bare, from, to string) (files []string, minus, plus []string) {
	t.Helper()
	files = strings.Fields(gitOut(t, bare, "diff", "--name-only", from, to))
	for _, l := range strings.Split(gitOut(t, bare, "diff", "--unified=0", from, to), "\n") {
		switch {
		case strings.HasPrefix(l, "---"), strings.HasPrefix(l, "+++"):
		case strings.HasPrefix(l, "-"):
			minus = append(minus, l[1:])
		case strings.HasPrefix(l, "+"):
			plus = append(plus, l[1:])
		}
	}
	return files, minus, plus
}

func tagOf(u *unstructured.Unstructured) string {
	tag, _, _ := unstructured.NestedString(u.Object, "spec", "image", "tag")
	return tag
}

func pushOn(cfg *Config) { cfg.Push = true }

func testWriteOneLine(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "wb1")
	first := repo.Commit(t, "fleet", map[string]string{"crs/web.yaml": webFile, "crs/api.yaml": appYAML("wb-api", "hanzo", "v0.9.1")})
	e := newTestEngine(t, c, repo.URL, "wb1", pushOn)
	if _, err := e.Reconcile(t.Context(), "request", false); err != nil {
		t.Fatal(err)
	}
	if file, ok := e.Manages("hanzo", "wb-web"); !ok || file != "crs/web.yaml" {
		t.Fatalf("Manages: %q %v", file, ok)
	}
	sha, err := e.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "wb-web", Tag: "v1.1.0", Verb: "rollback",
		AuthorName: "Ada Lovelace", AuthorEmail: "ada@example.com", RequestID: "req-1\nSigned-off-by: x"})
	if err != nil {
		t.Fatal(err)
	}
	if head := repo.Head(t); head != sha {
		t.Fatalf("the ref is at %s, the write-back answered %s", head, sha)
	}
	if parent := gitOut(t, repo.Bare, "rev-parse", sha+"^"); parent != first {
		t.Fatalf("the commit's parent is %s, want %s", parent, first)
	}
	files, minus, plus := changedLines(t, repo.Bare, first, sha)
	if len(files) != 1 || files[0] != "crs/web.yaml" || len(minus) != 1 || len(plus) != 1 ||
		minus[0] != `    tag: "v1.2.0"   # pinned by hand` || plus[0] != `    tag: "v1.1.0"   # pinned by hand` {
		t.Fatalf("the commit changed %v: -%q +%q; want one line of crs/web.yaml", files, minus, plus)
	}
	meta := gitOut(t, repo.Bare, "log", "-1", "--format=%an <%ae>|%cn|%B", sha)
	want := "Ada Lovelace <ada@example.com>|deployd|deploy: roll back hanzo/wb-web to v1.1.0\n\nRequest-Id: req-1Signed-off-byx"
	if meta != want {
		t.Fatalf("commit %q\nwant   %q", meta, want)
	}
	if tag := tagOf(getApp(t, c, "hanzo", "wb-web")); tag != "v1.1.0" {
		t.Fatalf("the App in the cluster carries %q after the write-back, want v1.1.0", tag)
	}
	if st := e.Status(); st.Revision != sha {
		t.Fatalf("the engine reconciled %s, want %s", st.Revision, sha)
	}

	// The declared tag again: no commit.
	again, err := e.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "wb-web", Tag: "v1.1.0", Verb: "rollback", AuthorName: "Ada"})
	if err != nil || again != "" || repo.Head(t) != sha {
		t.Fatalf("the declared tag: %q, %v, head %s", again, err, repo.Head(t))
	}
	// A release words its message so.
	rel, err := e.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "wb-api", Tag: "v1.0.0", Verb: "release", AuthorName: "ops", AuthorEmail: "sub-7@id.example"})
	if err != nil {
		t.Fatal(err)
	}
	if s := gitOut(t, repo.Bare, "log", "-1", "--format=%s", rel); s != "deploy: release hanzo/wb-api v1.0.0" {
		t.Fatalf("release subject %q", s)
	}

	// History: the commits that touched the App's file, newest first; the
	// release of the other App is not among them.
	hist, err := e.History(t.Context(), "hanzo", "wb-web")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 || hist[0].SHA != sha || hist[1].SHA != first ||
		hist[0].Author != "Ada Lovelace <ada@example.com>" || hist[0].Tag != "v1.1.0" || hist[1].Tag != "v1.2.0" ||
		!strings.HasPrefix(hist[0].Message, "deploy: roll back hanzo/wb-web to v1.1.0") || hist[1].Message != "fleet" || hist[0].Date.IsZero() {
		t.Fatalf("history %+v", hist)
	}
	// An outside commit to the file shows once the engine has fetched it.
	gitOut(t, repo.Work, "pull", "--quiet", "--ff-only", "origin", "main")
	bump := repo.Commit(t, "bump web", map[string]string{"crs/web.yaml": strings.Replace(webFile, `"v1.2.0"`, `"v1.3.0"`, 1)})
	if _, err := e.Reconcile(t.Context(), "request", false); err != nil {
		t.Fatal(err)
	}
	if hist, err = e.History(t.Context(), "hanzo", "wb-web"); err != nil || len(hist) != 3 || hist[0].SHA != bump || hist[0].Tag != "v1.3.0" || hist[0].Author != "test <test@example.com>" {
		t.Fatalf("history after an outside commit: %+v, %v", hist, err)
	}
	if hist, err := e.History(t.Context(), "hanzo", "nope"); err != nil || hist != nil {
		t.Fatalf("an App the engine does not declare: %+v, %v", hist, err)
	}
}

func testWriteConcurrent(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "wb2")
	first := repo.Commit(t, "fleet", map[string]string{"crs/a.yaml": appYAML("wb2-a", "hanzo", "v1.0.0"), "crs/b.yaml": appYAML("wb2-b", "hanzo-devnet", "v2.0.0")})
	e := newTestEngine(t, c, repo.URL, "wb2", pushOn)
	if _, err := e.Reconcile(t.Context(), "request", false); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, w := range []TagWrite{
		{Namespace: "hanzo", Name: "wb2-a", Tag: "v0.9.0", Verb: "rollback", AuthorName: "a"},
		{Namespace: "hanzo-devnet", Name: "wb2-b", Tag: "v1.9.0", Verb: "rollback", AuthorName: "b"},
	} {
		wg.Go(func() { _, errs[i] = e.WriteTag(t.Context(), w) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	head := repo.Head(t)
	if n := gitOut(t, repo.Bare, "rev-list", "--count", first+".."+head); n != "2" {
		t.Fatalf("%s new commits, want 2", n)
	}
	a := gitOut(t, repo.Bare, "show", head+":crs/a.yaml")
	b := gitOut(t, repo.Bare, "show", head+":crs/b.yaml")
	if !strings.Contains(a, "tag: v0.9.0}") || !strings.Contains(b, "tag: v1.9.0}") {
		t.Fatalf("a lost update:\n%s\n%s", a, b)
	}
	if tagOf(getApp(t, c, "hanzo", "wb2-a")) != "v0.9.0" || tagOf(getApp(t, c, "hanzo-devnet", "wb2-b")) != "v1.9.0" {
		t.Fatal("the cluster does not carry both tags")
	}

	// An outside commit to another file lands between the write-back's
	// fetch and its push: the push is refused as non-fast-forward, the
	// edit is made again on top, and it lands.
	gitOut(t, repo.Work, "pull", "--quiet", "--ff-only", "origin", "main")
	var outside string
	e.git.beforePush = func(attempt int) {
		if attempt == 1 {
			outside = repo.Commit(t, "outside", map[string]string{"README.md": "fleet\n"})
		}
	}
	sha, err := e.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "wb2-a", Tag: "v0.8.0", Verb: "rollback", AuthorName: "a"})
	e.git.beforePush = nil
	if err != nil {
		t.Fatal(err)
	}
	if outside == "" || gitOut(t, repo.Bare, "rev-parse", sha+"^") != outside {
		t.Fatalf("the retried commit's parent is not the outside commit %s", outside)
	}
	files, minus, plus := changedLines(t, repo.Bare, outside, sha)
	if len(files) != 1 || files[0] != "crs/a.yaml" || len(minus) != 1 || len(plus) != 1 {
		t.Fatalf("the retried commit changed %v -%q +%q", files, minus, plus)
	}

	// A ref that keeps moving: every push loses the race; then a conflict.
	before := repo.Head(t)
	gitOut(t, repo.Work, "pull", "--quiet", "--ff-only", "origin", "main")
	n := 0
	e.git.beforePush = func(int) {
		n++
		repo.Commit(t, "outside", map[string]string{"README.md": strings.Repeat("x", n) + "\n"})
	}
	_, err = e.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "wb2-a", Tag: "v0.7.0", Verb: "rollback", AuthorName: "a"})
	e.git.beforePush = nil
	var we *WriteError
	if !errors.As(err, &we) || !we.Conflict() || n != pushAttempts {
		t.Fatalf("a ref that kept moving: %v after %d pushes", err, n)
	}
	if tip := gitOut(t, repo.Bare, "log", "-1", "--format=%cn", "main"); tip == "deployd" || gitOut(t, repo.Bare, "rev-list", "--count", before+"..main") != "4" {
		t.Fatalf("the ref holds a write-back commit after a conflict (committed by %s)", tip)
	}
}

func testWriteRefused(t *testing.T, c *clustertest.Cluster, srv *enginetest.Server) {
	repo := srv.NewRepo(t, "wb3")
	repo.Commit(t, "fleet", map[string]string{"crs/a.yaml": appYAML("wb3-a", "hanzo", "v1.0.0")})
	off := newTestEngine(t, c, repo.URL, "wb3", nil)
	if _, err := off.Reconcile(t.Context(), "request", false); err != nil {
		t.Fatal(err)
	}
	head := repo.Head(t)
	var we *WriteError
	if _, err := off.WriteTag(t.Context(), TagWrite{Namespace: "hanzo", Name: "wb3-a", Tag: "v0.9.0", Verb: "rollback"}); !errors.As(err, &we) || !we.Conflict() {
		t.Fatalf("push off: %v", err)
	}
	on := newTestEngine(t, c, repo.URL, "wb3", pushOn)
	if _, err := on.Reconcile(t.Context(), "request", false); err != nil {
		t.Fatal(err)
	}
	for _, w := range []TagWrite{
		{Namespace: "hanzo", Name: "wb3-a", Tag: "v1\nx: y", Verb: "rollback"},
		{Namespace: "hanzo", Name: "wb3-a", Tag: "", Verb: "rollback"},
		{Namespace: "hanzo", Name: "../crs/a", Tag: "v0.9.0", Verb: "rollback"},
		{Namespace: "hanzo-devnet", Name: "wb3-a", Tag: "v0.9.0", Verb: "rollback"},
	} {
		if _, err := on.WriteTag(t.Context(), w); !errors.As(err, &we) || !we.Invalid() {
			t.Errorf("%+v: %v, want a refusal", w, err)
		}
	}
	if h := repo.Head(t); h != head {
		t.Fatalf("a refused write moved the ref to %s", h)
	}
}
