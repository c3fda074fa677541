package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// countingServer is a loopback HTTP server that counts the requests it
// gets and answers each with a small object.
func countingServer(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Write([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fetched}\n"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

const kApp = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: b}\n"

type remoteCase struct {
	name  string
	files func(u string) map[string]string // u is the server's URL
	file  string                           // the kustomization the error names
	want  string                           // and a part of its message
	// fetches: kustomize's own loader, unchecked, requests u (the control).
	fetches bool
}

func remoteCases() []remoteCase {
	k := func(kust string, extra ...string) func(u string) map[string]string {
		return func(u string) map[string]string {
			m := map[string]string{"k/kustomization.yaml": strings.ReplaceAll(kust, "URL", u), "k/app.yaml": kApp}
			for i := 0; i+1 < len(extra); i += 2 {
				m[extra[i]] = strings.ReplaceAll(extra[i+1], "URL", u)
			}
			return m
		}
	}
	const target = "  target: {kind: ConfigMap, name: app}\n"
	return []remoteCase{
		{name: "resources", files: k("resources:\n- app.yaml\n- URL/r.yaml\n"), want: "resources[1]", fetches: true},
		{name: "bases", files: k("resources: [app.yaml]\nbases:\n- URL/base\n"), want: "bases[0]", fetches: true},
		{name: "components", files: k("resources: [app.yaml]\ncomponents:\n- URL/comp\n"), want: "components[0]"},
		{name: "crds", files: k("resources: [app.yaml]\ncrds:\n- URL/crd.json\n"), want: "crds[0]", fetches: true},
		{name: "patches path", files: k("resources: [app.yaml]\npatches:\n- path: URL/p.yaml\n" + target), want: "patches[0].path", fetches: true},
		{name: "patchesStrategicMerge", files: k("resources: [app.yaml]\npatchesStrategicMerge:\n- URL/p.yaml\n"), want: "patchesStrategicMerge[0]", fetches: true},
		{name: "patchesJson6902 path", files: k("resources: [app.yaml]\npatchesJson6902:\n- path: URL/p.json\n  target: {version: v1, kind: ConfigMap, name: app}\n"), want: "patchesJson6902[0].path", fetches: true},
		{name: "replacements path", files: k("resources: [app.yaml]\nreplacements:\n- path: URL/r.yaml\n"), want: "replacements[0].path", fetches: true},
		{name: "generators", files: k("generators:\n- URL/g.yaml\n"), want: "generators[0]", fetches: true},
		{name: "transformers", files: k("resources: [app.yaml]\ntransformers:\n- URL/t.yaml\n"), want: "transformers[0]", fetches: true},
		{name: "validators", files: k("resources: [app.yaml]\nvalidators:\n- URL/v.yaml\n"), want: "validators[0]", fetches: true},
		{name: "configMapGenerator files", files: k("configMapGenerator:\n- name: c\n  files: [URL/f.txt]\n"), want: "configMapGenerator[0].files[0]", fetches: true},
		{name: "configMapGenerator keyed file", files: k("configMapGenerator:\n- name: c\n  files: [key=URL/f.txt]\n"), want: "configMapGenerator[0].files[0]", fetches: true},
		{name: "configMapGenerator envs", files: k("configMapGenerator:\n- name: c\n  envs: [URL/e.env]\n"), want: "configMapGenerator[0].envs[0]", fetches: true},
		{name: "configMapGenerator env", files: k("configMapGenerator:\n- name: c\n  env: URL/e.env\n"), want: "configMapGenerator[0].env", fetches: true},
		{name: "secretGenerator files", files: k("secretGenerator:\n- name: s\n  files: [URL/f.txt]\n"), want: "secretGenerator[0].files[0]", fetches: true},
		{name: "secretGenerator envs", files: k("secretGenerator:\n- name: s\n  envs: [URL/e.env]\n"), want: "secretGenerator[0].envs[0]", fetches: true},
		{name: "openapi path", files: k("resources: [app.yaml]\nopenapi:\n  path: URL/schema.json\n"), want: "openapi.path", fetches: true},
		{name: "configurations", files: k("resources: [app.yaml]\nconfigurations:\n- URL/c.yaml\n"), want: "configurations[0]", fetches: true},
		{name: "upper-case scheme", files: k("resources:\n- HTTP" + "://127.0.0.1:1/r.yaml\n"), want: "resources[0]"},
		{name: "git ssh shorthand", files: k("resources:\n- git@github.com:hanzoai/universe.git//infra\n"), want: "resources[0]"},
		{name: "github shorthand", files: k("resources:\n- GitHub.com/hanzoai/universe//infra\n"), want: "resources[0]"},
		{name: "git:: prefix", files: k("resources:\n- git::URL/repo.git\n"), want: "resources[0]"},
		// A generator's, transformer's or validator's own configuration
		// names a path its builtin plugin loads.
		{name: "transformer file's path", files: k("resources: [app.yaml]\ntransformers: [t.yaml]\n",
			"k/t.yaml", "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: URL/p.yaml\ntarget: {kind: ConfigMap}\n"),
			want: "transformers[0] (k/t.yaml) path", fetches: true},
		{name: "replacement transformer file", files: k("resources: [app.yaml]\ntransformers: [t.yaml]\n",
			"k/t.yaml", "apiVersion: builtin\nkind: ReplacementTransformer\nmetadata: {name: r}\nreplacements:\n- path: URL/r.yaml\n"),
			want: "transformers[0] (k/t.yaml) replacements[0].path", fetches: true},
		{name: "value-add transformer file", files: k("resources: [app.yaml]\ntransformers: [t.yaml]\n",
			"k/t.yaml", "apiVersion: builtin\nkind: ValueAddTransformer\nmetadata: {name: v}\nvalue: x\ntargetFilePath: URL/f.yaml\n"),
			want: "transformers[0] (k/t.yaml) targetFilePath"},
		{name: "inline generator", files: k("generators:\n- |\n  apiVersion: builtin\n  kind: ConfigMapGenerator\n  metadata: {name: c}\n  files: [URL/f.txt]\n"),
			want: "generators[0] files[0]", fetches: true},
		{name: "second document of a generator file", files: k("generators: [g.yaml]\n",
			"k/g.yaml", "apiVersion: builtin\nkind: ConfigMapGenerator\nmetadata: {name: a}\nliterals: [a=b]\n---\napiVersion: builtin\nkind: SecretGenerator\nmetadata: {name: s}\nenvs: [URL/e.env]\n"),
			want: "generators[0] (k/g.yaml) document 2 envs[0]", fetches: true},
		{name: "transformer folder", files: k("resources: [app.yaml]\ntransformers: [tdir]\n",
			"k/tdir/kustomization.yaml", "resources: [t.yaml]\n", "k/tdir/t.yaml", "apiVersion: builtin\nkind: LabelTransformer\nmetadata: {name: l}\nlabels: {a: b}\nfieldSpecs: [{path: metadata/labels, create: true}]\n"),
			want: `transformers[0]: "tdir" is a folder`},
		// A folder's kustomization could patch a configuration into naming
		// a URL, which only the build would show.
		{name: "transformer folder patched to a URL", files: k("resources: [app.yaml]\ntransformers: [tdir]\n",
			"k/tdir/kustomization.yaml", "resources: [t.yaml]\npatches:\n- target: {kind: PatchTransformer}\n  patch: '[{\"op\": \"replace\", \"path\": \"/path\", \"value\": \"URL/p.yaml\"}]'\n",
			"k/tdir/t.yaml", "apiVersion: builtin\nkind: PatchTransformer\nmetadata: {name: p}\npath: p.yaml\ntarget: {kind: ConfigMap}\n",
			"k/tdir/p.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {c: d}\n"),
			want: `transformers[0]: "tdir" is a folder`, fetches: true},
		// Helm, in any form.
		{name: "helmCharts", files: k("helmCharts:\n- name: x\n  repo: URL/charts\n  version: 1.0.0\n"), want: "helmCharts: the engine does not run Helm"},
		{name: "helmCharts local", files: k("helmCharts:\n- name: x\n", "k/charts/x/Chart.yaml", "name: x\n"), want: "helmCharts: the engine does not run Helm"},
		{name: "helmGlobals", files: k("resources: [app.yaml]\nhelmGlobals: {chartHome: charts}\n"), want: "helmGlobals: the engine does not run Helm"},
		{name: "helmChartInflationGenerator", files: k("helmChartInflationGenerator:\n- chartName: x\n  chartRepoUrl: URL/charts\n"), want: "helmChartInflationGenerator: the engine does not run Helm"},
		{name: "helm generator file", files: k("generators: [h.yaml]\n",
			"k/h.yaml", "apiVersion: builtin\nkind: HelmChartInflationGenerator\nmetadata: {name: h}\nname: x\n"),
			want: "generators[0] (k/h.yaml): the engine does not run Helm"},
		// Every kustomization the build includes is checked: a base, a
		// component, a base of a base.
		{name: "nested base", files: k("resources: [../base]\n",
			"base/kustomization.yaml", "resources: [../deeper]\n",
			"deeper/kustomization.yaml", "resources: [app.yaml]\npatches:\n- path: URL/p.yaml\n"+target,
			"deeper/app.yaml", kApp),
			file: "deeper/kustomization.yaml", want: "patches[0].path", fetches: true},
		{name: "component", files: k("resources: [app.yaml]\ncomponents: [../comp]\n",
			"comp/kustomization.yaml", "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\npatches:\n- path: URL/p.yaml\n"+target),
			file: "comp/kustomization.yaml", want: "patches[0].path", fetches: true},
	}
}

// TestRenderKustomizeStaysInTheRepository: a kustomization (or one it
// includes) that names a URL anywhere, or Helm, fails the render with an
// error naming the kustomization and the field, and nothing is requested.
func TestRenderKustomizeStaysInTheRepository(t *testing.T) {
	for _, c := range remoteCases() {
		t.Run(c.name, func(t *testing.T) {
			u, requests := countingServer(t)
			files := map[string][]byte{}
			for p, s := range c.files(u) {
				files[p] = []byte(s)
			}
			docs, err := Render(t.Context(), files, "k")
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("got %v, %v; want a RenderError", names(docs), err)
			}
			file := c.file
			if file == "" {
				file = "k/kustomization.yaml"
			}
			if re.File != file || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %q, want it to name %s and say %q", err, file, c.want)
			}
			if n := requests.Load(); n != 0 {
				t.Errorf("the server got %d requests, want 0", n)
			}
		})
	}
}

// TestKustomizeLoaderFetchesURLs is the control of the test above: built by
// kustomize alone, without the engine's check, these kustomizations do
// request the URL (a failure here means a case no longer exercises a fetch).
func TestKustomizeLoaderFetchesURLs(t *testing.T) {
	for _, c := range remoteCases() {
		if !c.fetches {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			u, requests := countingServer(t)
			fs := filesys.MakeFsInMemory()
			for p, s := range c.files(u) {
				if err := fs.WriteFile("/"+p, []byte(s)); err != nil {
					t.Fatal(err)
				}
			}
			opts := krusty.MakeDefaultOptions()
			opts.LoadRestrictions = types.LoadRestrictionsRootOnly
			opts.PluginConfig = types.DisabledPluginConfig()
			krusty.MakeKustomizer(opts).Run(fs, "/k") // its error does not matter
			if requests.Load() == 0 {
				t.Errorf("kustomize did not request %s", u)
			}
		})
	}
}

// TestRenderKustomizeDataURLs: URLs in fields kustomize only copies into
// objects (annotations, literals, inline patches) are data and render.
func TestRenderKustomizeDataURLs(t *testing.T) {
	files := map[string][]byte{
		"k/kustomization.yaml": []byte("resources: [app.yaml]\n" +
			"commonAnnotations: {docs: 'https://docs.hanzo.ai/deploy'}\n" +
			"configMapGenerator:\n- name: env\n  literals: [API_URL=https://api.hanzo.ai, 'HOME_PAGE=https://hanzo.ai']\n" +
			"patches:\n- target: {kind: ConfigMap, name: app}\n  patch: |-\n    - op: add\n      path: /data/link\n      value: https://hanzo.ai/app\n" +
			"transformers:\n- |\n  apiVersion: builtin\n  kind: AnnotationsTransformer\n  metadata: {name: a}\n  annotations: {source: 'https://github.com/hanzoai/deploy'}\n  fieldSpecs: [{path: metadata/annotations, create: true}]\n"),
		"k/app.yaml": []byte(kApp),
	}
	docs, err := Render(t.Context(), files, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 2 {
		t.Fatalf("got %v, want the App's ConfigMap and the generated one", names(docs))
	}
	for _, d := range docs {
		if d.Object.GetName() == "app" {
			if got := d.Object.GetAnnotations()["docs"]; got != "https://docs.hanzo.ai/deploy" {
				t.Errorf("docs annotation %q", got)
			}
			if got := d.Object.GetAnnotations()["source"]; got != "https://github.com/hanzoai/deploy" {
				t.Errorf("source annotation %q", got)
			}
			if got, _, _ := unstructuredString(d.Object.Object, "data", "link"); got != "https://hanzo.ai/app" {
				t.Errorf("patched link %q", got)
			}
		}
	}
}

// TestRenderKustomizeMissingFiles: a path the files do not hold (as a
// symlink, which Source.Files leaves out) fails the build, naming it.
func TestRenderKustomizeMissingFiles(t *testing.T) {
	cases := map[string]struct{ kust, want string }{
		"resource":  {"resources: [app.yaml, link.yaml]\n", "link.yaml"},
		"patch":     {"resources: [app.yaml]\npatches:\n- path: link.yaml\n  target: {kind: ConfigMap}\n", "link.yaml"},
		"generator": {"generators: [link.yaml]\n", `generators[0]: "link.yaml" is not a file of the repository`},
		"base":      {"resources: [app.yaml, ../linked-dir]\n", "linked-dir"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			files := map[string][]byte{"k/kustomization.yaml": []byte(c.kust), "k/app.yaml": []byte(kApp)}
			_, err := Render(t.Context(), files, "k")
			var re *RenderError
			if !errors.As(err, &re) || re.File != "k/kustomization.yaml" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v; want a RenderError naming k/kustomization.yaml and %q", err, c.want)
			}
		})
	}
}

// TestRenderSourceSkipsSymlinks: a symlink committed to the repository (to
// a file outside the checkout, and to one inside it) is not among the
// files a render gets, so a kustomization naming it fails.
func TestRenderSourceSkipsSymlinks(t *testing.T) {
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret.yaml")
	write := func(p, s string) {
		t.Helper()
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(outside, []byte("apiVersion: v1\nkind: Secret\nmetadata: {name: stolen}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write("k/kustomization.yaml", "resources: [app.yaml, outside.yaml]\n")
	write("k/app.yaml", kApp)
	if err := os.Symlink(outside, filepath.Join(dir, "k", "outside.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("app.yaml", filepath.Join(dir, "k", "inside.yaml")); err != nil {
		t.Fatal(err)
	}
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	sha, err := wt.Commit("symlinks", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Unix(0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.CommitObject(sha)
	if err != nil {
		t.Fatal(err)
	}
	tree, _ := c.Tree()
	if e, err := tree.FindEntry("k/outside.yaml"); err != nil || e.Mode != filemode.Symlink {
		t.Fatalf("the commit's k/outside.yaml: %v, %v; want a symlink", e, err)
	}

	files, err := (&Source{dir: dir}).Files(sha.String(), "k")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"k/outside.yaml", "k/inside.yaml"} {
		if _, ok := files[p]; ok {
			t.Errorf("Files holds the symlink %s", p)
		}
	}
	if _, ok := files["k/app.yaml"]; !ok {
		t.Fatalf("Files lacks k/app.yaml: %v", files)
	}
	_, err = Render(t.Context(), files, "k")
	var re *RenderError
	if !errors.As(err, &re) || re.File != "k/kustomization.yaml" || !strings.Contains(err.Error(), "outside.yaml") || strings.Contains(err.Error(), "stolen") {
		t.Fatalf("got %v; want a RenderError naming k/kustomization.yaml and outside.yaml", err)
	}
}

// TestRenderContext: a render whose context has ended fails at once with
// the deadline error, a kustomization or plain files alike.
func TestRenderContext(t *testing.T) {
	kust := map[string][]byte{"k/kustomization.yaml": []byte("resources: [app.yaml]\n"), "k/app.yaml": []byte(kApp)}
	plain := map[string][]byte{"k/a.yaml": []byte(kApp), "k/b.yaml": []byte(kApp)}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	expired, cancel2 := context.WithDeadline(t.Context(), time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		name  string
		ctx   context.Context
		files map[string][]byte
		is    error
	}{
		{"cancelled kustomization", cancelled, kust, context.Canceled},
		{"expired kustomization", expired, kust, context.DeadlineExceeded},
		{"cancelled files", cancelled, plain, context.Canceled},
		{"expired files", expired, plain, context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			docs, err := Render(c.ctx, c.files, "k")
			var re *RenderError
			if !errors.As(err, &re) || !errors.Is(err, c.is) || !strings.Contains(err.Error(), "ran past the run's deadline") {
				t.Fatalf("got %v, %v; want the deadline error", names(docs), err)
			}
			if d := time.Since(start); d > time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

// TestRenderKustomizeDeadlineFreesTheEngine: a build still running when
// the context ends leaves Render at once with the deadline error; the build
// ends in the background, and the next render waits for it, within its own
// deadline.
func TestRenderKustomizeDeadlineFreesTheEngine(t *testing.T) {
	release := make(chan struct{})
	finished := make(chan struct{})
	real := buildKustomization
	buildKustomization = func(fs filesys.FileSystem, dir string) (resmap.ResMap, error) {
		defer close(finished)
		<-release
		return real(fs, dir)
	}
	t.Cleanup(func() { buildKustomization = real })
	files := map[string][]byte{"k/kustomization.yaml": []byte("resources: [app.yaml]\n"), "k/app.yaml": []byte(kApp)}

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Render(ctx, files, "k")
	var re *RenderError
	if !errors.As(err, &re) || re.File != "k/kustomization.yaml" || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "the render ran past the run's deadline") {
		t.Fatalf("got %v, want the deadline error", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Render returned after %v", d)
	}
	buildKustomization = real

	// The held build still runs: a render now waits for it, and gives up
	// at its own deadline.
	ctx2, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	if _, err := Render(ctx2, files, "k"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("while a build runs: %v, want the deadline error", err)
	}

	close(release)
	<-finished
	docs, err := Render(t.Context(), files, "k")
	if err != nil || len(docs) != 1 {
		t.Fatalf("after the held build ended: %v, %v", names(docs), err)
	}
}

// FuzzKustomization: whatever a kustomization says, the render answers
// objects or a RenderError, never panics, and never reaches the network
// (the seeds point every field kind at a counting loopback server).
func FuzzKustomization(f *testing.F) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Write([]byte(kApp))
	}))
	defer srv.Close()
	u := srv.URL + "/x.yaml"
	for _, seed := range []string{
		"resources: [app.yaml]\n",
		"resources: [app.yaml, " + u + "]\n",
		"resources: [app.yaml]\npatches: [{path: " + u + "}]\n",
		"resources: [app.yaml]\npatchesStrategicMerge: [" + u + "]\n",
		"resources: [app.yaml]\nreplacements: [{path: " + u + "}]\n",
		"resources: [app.yaml]\nconfigMapGenerator: [{name: c, files: [" + u + "]}]\n",
		"resources: [app.yaml]\ntransformers: [" + u + "]\n",
		"resources: [app.yaml]\nhelmCharts: [{name: x, repo: " + srv.URL + "}]\n",
		"resources: [app.yaml]\ncomponents: [c]\n",
		"resources: [app.yaml]\nopenapi: {path: " + u + "}\n",
		"resources: [app.yaml]\nPatches: [{Path: " + u + "}]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, kust []byte) {
		files := map[string][]byte{"k/kustomization.yaml": kust, "k/app.yaml": []byte(kApp),
			"k/c/kustomization.yaml": []byte("apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\n")}
		docs, err := Render(t.Context(), files, "k")
		if err != nil {
			var re *RenderError
			if !errors.As(err, &re) {
				t.Fatalf("got %T %v, want a RenderError", err, err)
			}
		}
		for _, d := range docs {
			if d.Object.GetKind() == "" || d.Object.GetName() == "" {
				t.Fatalf("rendered %v", d.Object.Object)
			}
		}
		if got := n.Load(); got != 0 {
			t.Fatalf("the render made %d requests to the network for %q", got, kust)
		}
	})
}
