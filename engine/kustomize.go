package engine

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

func isKustomizationName(name string) bool {
	for _, n := range kustomizationNames {
		if n == name {
			return true
		}
	}
	return false
}

// renderKustomize builds the kustomization at dir from an in-memory copy of
// the files: no remote bases or resources, no plugins (exec, container or
// Go), no Helm, loads restricted to the kustomization's root.
func renderKustomize(files map[string][]byte, dir string) ([]Doc, error) {
	fs := filesys.MakeFsInMemory()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if isKustomizationName(path.Base(name)) {
			if err := refuseRemote(name, files[name]); err != nil {
				return nil, err
			}
		}
		if err := fs.WriteFile("/"+name, files[name]); err != nil {
			return nil, &RenderError{File: name, Msg: err.Error()}
		}
	}
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	opts.PluginConfig = types.DisabledPluginConfig()
	rm, err := krusty.MakeKustomizer(opts).Run(fs, "/"+dir)
	if err != nil {
		return nil, &RenderError{File: path.Join(dir, "kustomization.yaml"), Msg: "kustomize build: " + strings.ReplaceAll(err.Error(), "/"+dir+"/", "")}
	}
	var out []Doc
	for _, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, &RenderError{File: path.Join(dir, "kustomization.yaml"), Msg: "kustomize build: " + err.Error()}
		}
		u, err := toObject(normalizeNumbers(m).(map[string]any))
		if err != nil {
			return nil, &RenderError{File: path.Join(dir, "kustomization.yaml"), Msg: "kustomize build: " + err.Error()}
		}
		out = append(out, Doc{Object: u, File: path.Join(dir, "kustomization.yaml")})
	}
	return out, nil
}

// refuseRemote fails a kustomization that names a remote base, component
// or resource: the engine renders only what the fetched commit holds.
func refuseRemote(name string, content []byte) error {
	var k struct {
		Resources  []string `json:"resources"`
		Bases      []string `json:"bases"`
		Components []string `json:"components"`
		Crds       []string `json:"crds"`
	}
	if err := yaml.Unmarshal(content, &k); err != nil {
		line := 0
		if n, ok := errorLine(err); ok {
			line = n
		}
		return &RenderError{File: name, Line: line, Msg: cleanYAMLError(err)}
	}
	for _, list := range [][]string{k.Resources, k.Bases, k.Components, k.Crds} {
		for _, r := range list {
			if remoteRef(r) {
				return &RenderError{File: name, Msg: fmt.Sprintf("%q is remote; the engine builds only what the repository holds (no remote bases)", r)}
			}
		}
	}
	return nil
}

func remoteRef(r string) bool {
	r = strings.TrimSpace(r)
	if strings.Contains(r, "://") || strings.HasPrefix(r, "git@") || strings.HasPrefix(r, "git::") {
		return true
	}
	host, _, _ := strings.Cut(r, "/")
	switch host {
	case "github.com", "gitlab.com", "bitbucket.org", "dev.azure.com", "ssh.dev.azure.com":
		return true
	}
	return strings.Contains(r, "?ref=") || strings.Contains(r, ".git//")
}
