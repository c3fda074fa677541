package deploy_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/hanzoai/deploy"

// importRules are the arrows between the packages: each package (and its
// sub-packages; the longest key that prefixes a path rules it) may import
// only the packages of ours listed, and none of the forbidden prefixes,
// directly or through another package. Test-support packages (clustertest,
// hydratest, …) are checked like any other: their arrows point down too.
var importRules = map[string]struct {
	ours      []string // our packages it may reach
	forbidden []string // import path prefixes it must never reach
}{
	"projection": {nil, []string{"k8s.io/client-go", "github.com/labstack/echo", "net/http"}},
	"auth":       {nil, []string{"k8s.io/client-go", "github.com/labstack/echo"}},
	"web":        {nil, []string{"k8s.io/client-go", "github.com/labstack/echo"}},
	"stream":     {[]string{"projection", "auth"}, []string{"k8s.io/client-go", "github.com/labstack/echo"}},
	"cluster":    {[]string{"projection"}, []string{"github.com/labstack/echo"}},
	"handlers":   {[]string{"projection", "stream", "auth", "web", "gitops", "metrics"}, []string{"k8s.io/client-go"}},
	"metrics":    {[]string{"projection", "stream", "auth", "gitops"}, []string{"k8s.io/client-go", "github.com/labstack/echo"}},
	"demo":       {[]string{"projection", "cluster", "auth", "fleet"}, []string{"github.com/labstack/echo"}},
	"engine":     {[]string{"projection", "auth", "gitops"}, []string{"github.com/labstack/echo"}},
	"gitops":     {[]string{"projection"}, []string{"k8s.io/client-go", "github.com/labstack/echo", "net/http"}},
	"fleet":      {[]string{"projection"}, []string{"github.com/labstack/echo"}},

	// Test support: each sits beside what it tests and above nothing else.
	"cluster/clustertest": {[]string{"projection", "fleet"}, []string{"github.com/labstack/echo"}},
	"demo/demotest":       {[]string{"projection", "cluster"}, []string{"github.com/labstack/echo"}},
	"engine/enginetest":   {nil, []string{"github.com/labstack/echo"}},
}

// ruleFor is the rule of a package path relative to the module: the
// longest rule key equal to it or prefixing it at a slash.
func ruleFor(rel string) (key string, ok bool) {
	for k := range importRules {
		if (rel == k || strings.HasPrefix(rel, k+"/")) && len(k) > len(key) {
			key, ok = k, true
		}
	}
	return key, ok
}

type listedPackage struct {
	ImportPath string
	Deps       []string
}

// TestImportArrows fails when an import arrow points the wrong way.
func TestImportArrows(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps=false", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel, ok := strings.CutPrefix(p.ImportPath, module+"/")
		if !ok {
			continue
		}
		key, ok := ruleFor(rel)
		if !ok {
			continue // cmd/… may import anything of ours
		}
		rule := importRules[key]
		top, _, _ := strings.Cut(rel, "/")
		checked++
		for _, dep := range p.Deps {
			for _, bad := range rule.forbidden {
				if dep == bad || strings.HasPrefix(dep, bad+"/") {
					t.Errorf("%s reaches %s, which the import rules forbid", rel, dep)
				}
			}
			ours, isOurs := strings.CutPrefix(dep, module+"/")
			if !isOurs {
				continue
			}
			depTop, _, _ := strings.Cut(ours, "/")
			if depTop == top {
				continue
			}
			allowed := false
			for _, a := range rule.ours {
				allowed = allowed || a == depTop
			}
			if !allowed {
				t.Errorf("%s imports %s: %s may import only %v of ours", rel, ours, top, rule.ours)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no package of the module was checked")
	}
}
