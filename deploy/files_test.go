package deploy_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/hanzoai/deploy/cluster/clustertest"
)

// repoRoot is the repository root: go test runs in deploy/.
const repoRoot = ".."

// manifestFiles are the YAML files of deploy/ that are Kubernetes objects:
// everything but kustomization.yaml, the compose/ folder (files the Docker
// stack mounts) and the monitoring/ folder (rules and a dashboard for the
// operator's Prometheus and Grafana, checked by monitoring_test.go),
// relative to deploy/.
func manifestFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (path == "compose" || path == "monitoring") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".yaml") && path != "kustomization.yaml" {
			files = append(files, filepath.ToSlash(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(files)
	if len(files) == 0 {
		t.Fatal("no manifests in deploy/")
	}
	return files
}

// readObjects parses every document of a multi-document YAML file; empty
// documents (comments only) are skipped.
func readObjects(t *testing.T, path string) []*unstructured.Unstructured {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var objs []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var m map[string]any
		err := dec.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		if len(m) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("%s: a document without apiVersion, kind or name: %v", path, m)
		}
		objs = append(objs, u)
	}
	if len(objs) == 0 {
		t.Fatalf("%s holds no object", path)
	}
	return objs
}

// readYAML decodes one YAML file into v, rejecting fields v does not have
// (a misspelled field of a Kubernetes object fails).
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(raw, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

// readYAMLPart decodes the fields of one YAML file that v has, ignoring the
// rest (for files of other programs, such as Dex's configuration).
func readYAMLPart(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, v); err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
}

// describe names an object in messages.
func describe(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// runtimeEnv are variables set for deployd that the Go runtime or the
// OpenTelemetry SDK read, not deployd's own code.
var runtimeEnv = []string{"GOMEMLIMIT", "OTEL_SERVICE_NAME"}

var envName = regexp.MustCompile(`"([A-Z][A-Z0-9_]{2,})"`)

// deploydEnv is every environment variable name deployd's serve path
// mentions (quoted in cmd/deployd and auth), so a manifest that sets a
// misspelled variable fails instead of being silently ignored.
func deploydEnv(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, dir := range []string{"cmd/deployd", "auth"} {
		files, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range envName.FindAllSubmatch(src, -1) {
				names[string(m[1])] = true
			}
		}
	}
	for _, n := range []string{"DEPLOY_PUBLIC_URL", "IAM_ENDPOINT", "DEPLOY_COOKIE_KEY"} {
		if !names[n] {
			t.Fatalf("found no mention of %s in cmd/deployd or auth: the scan is broken", n)
		}
	}
	for _, n := range runtimeEnv {
		names[n] = true
	}
	return names
}

// tool is the path of a real component built by hack/build-tools.sh; a
// missing one skips the test naming make test, or fails it under
// DEPLOYD_REQUIRE_TOOLS=1 (as make test runs).
func tool(t *testing.T, name string) string {
	t.Helper()
	dir := clustertest.ToolsDir()
	path := filepath.Join(dir, name)
	if fi, err := os.Stat(path); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
		return path
	}
	if os.Getenv(clustertest.RequireEnv) == "1" {
		t.Fatalf("%s not found at %s (%s=1): run make tools (it builds the real components)", name, path, clustertest.RequireEnv)
	}
	t.Skipf("%s not found in %s: run make test (it builds the real components)", name, dir)
	return ""
}
