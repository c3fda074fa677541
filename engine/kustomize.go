package engine

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/provider"
	"sigs.k8s.io/kustomize/api/resmap"
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

// regularFile reports whether a git tree entry of mode m is a file whose
// content a render may read: not a symlink (go-git's IsFile counts one),
// not a submodule. A symlink is never followed, inside the checkout or out.
func regularFile(m filemode.FileMode) bool {
	return m == filemode.Regular || m == filemode.Executable || m == filemode.Deprecated
}

// kustomizeBuilds lets one kustomize build run at a time: kustomize keeps
// its OpenAPI schema in package state, and a build that outlived its run
// must end before the next one starts.
var kustomizeBuilds = make(chan struct{}, 1)

// renderKustomize builds the kustomization at dir from an in-memory copy of
// the files: nothing but the repository's regular files can be loaded (no
// URL, no remote base, nothing outside the checkout), no plugins (exec,
// container or Go), no Helm, loads restricted to each kustomization's root.
// Every kustomization in files is checked before the build
// (checkKustomization). The build runs under ctx: when ctx ends first, the
// render fails at once and the build finishes in the background.
func renderKustomize(ctx context.Context, files map[string][]byte, dir string) ([]Doc, error) {
	kfile := path.Join(dir, kustomizationNames[0])
	for _, name := range kustomizationNames {
		if _, ok := files[path.Join(dir, name)]; ok {
			kfile = path.Join(dir, name)
			break
		}
	}
	fs := filesys.MakeFsInMemory()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if ctx.Err() != nil {
			return nil, pastDeadline(ctx, kfile)
		}
		if isKustomizationName(path.Base(name)) {
			if err := checkKustomization(files, name); err != nil {
				return nil, err
			}
		}
		if err := fs.WriteFile("/"+name, files[name]); err != nil {
			return nil, &RenderError{File: name, Msg: err.Error()}
		}
	}
	select {
	case kustomizeBuilds <- struct{}{}:
	case <-ctx.Done():
		return nil, pastDeadline(ctx, kfile)
	}
	type built struct {
		rm  resmap.ResMap
		err error
	}
	done := make(chan built, 1)
	build := buildKustomization
	go func() {
		defer func() { <-kustomizeBuilds }()
		defer func() {
			if p := recover(); p != nil {
				done <- built{err: fmt.Errorf("kustomize panicked: %v", p)}
			}
		}()
		rm, err := build(fs, "/"+dir)
		done <- built{rm, err}
	}()
	var b built
	select {
	case b = <-done:
	case <-ctx.Done():
		return nil, pastDeadline(ctx, kfile)
	}
	if b.err != nil {
		return nil, &RenderError{File: kfile, Msg: "kustomize build: " + strings.ReplaceAll(b.err.Error(), "/"+dir+"/", "")}
	}
	var out []Doc
	for _, r := range b.rm.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, &RenderError{File: kfile, Msg: "kustomize build: " + err.Error()}
		}
		u, err := toObject(normalizeNumbers(m).(map[string]any))
		if err != nil {
			return nil, &RenderError{File: kfile, Msg: "kustomize build: " + err.Error()}
		}
		out = append(out, Doc{Object: u, File: kfile})
	}
	return out, nil
}

// buildKustomization is kustomize's build of the kustomization at dir (a
// variable so that a test can hold a build in flight).
var buildKustomization = func(fs filesys.FileSystem, dir string) (resmap.ResMap, error) {
	opts := krusty.MakeDefaultOptions()
	opts.LoadRestrictions = types.LoadRestrictionsRootOnly
	opts.PluginConfig = types.DisabledPluginConfig()
	return krusty.MakeKustomizer(opts).Run(fs, dir)
}

// pastDeadline is the error of a render that ctx ended.
func pastDeadline(ctx context.Context, file string) error {
	return &RenderError{File: file, Msg: "the render ran past the run's deadline (" + ctx.Err().Error() + ")", cause: ctx.Err()}
}

const noRemote = "the engine builds only what the repository holds (no URLs, no remote bases)"

// checkKustomization refuses a kustomization that could make the build
// reach past the repository: any string in any field that is a URL or a
// remote git reference (remoteRef), wherever kustomize would use it (a
// resource, base or component, a patch, replacement, configuration, CRD or
// OpenAPI path, a generator's files or envs); Helm in any form; and a
// generator, transformer or validator that is not inline or a file of the
// repository. A generator's, transformer's or validator's configuration
// (inline or in its file) is checked the same way, since its builtin
// plugin loads the paths it names (PatchTransformer's path,
// ReplacementTransformer's replacements[].path, ...). The error names the
// kustomization and the field (patches[0].path).
func checkKustomization(files map[string][]byte, name string) error {
	var k any
	if err := yaml.Unmarshal(files[name], &k); err != nil {
		line := 0
		if n, ok := errorLine(err); ok {
			line = n
		}
		return &RenderError{File: name, Line: line, Msg: cleanYAMLError(err)}
	}
	m, ok := k.(map[string]any)
	if !ok {
		// Not a map: kustomize refuses it; still, no string of it may be a URL.
		if at, v, bad := findRemote(k, ""); bad {
			return remoteError(name, at, v)
		}
		return nil
	}
	for _, key := range sortedKeys(m) {
		switch {
		case isHelmField(key):
			return &RenderError{File: name, Msg: key + ": the engine does not run Helm; it renders only what the repository holds (commit the chart's rendered manifests)"}
		case isPluginField(key):
			list, isList := m[key].([]any)
			if !isList {
				break
			}
			for i, e := range list {
				s, isString := e.(string)
				if !isString {
					continue
				}
				if err := checkPluginEntry(files, name, fmt.Sprintf("%s[%d]", key, i), s); err != nil {
					return err
				}
			}
		}
		if isDataField(key, m[key]) {
			continue
		}
		if at, v, bad := findRemote(m[key], key); bad {
			return remoteError(name, at, v)
		}
	}
	return nil
}

func remoteError(file, at, value string) error {
	if r := []rune(value); len(r) > 120 {
		value = string(r[:120]) + "…"
	}
	return &RenderError{File: file, Msg: fmt.Sprintf("%s: %s is remote; %s", at, strconv.Quote(value), noRemote)}
}

func isHelmField(key string) bool {
	return strings.EqualFold(key, "helmCharts") || strings.EqualFold(key, "helmGlobals") ||
		strings.EqualFold(key, "helmChartInflationGenerator")
}

func isPluginField(key string) bool {
	return strings.EqualFold(key, "generators") || strings.EqualFold(key, "transformers") ||
		strings.EqualFold(key, "validators")
}

// pluginConfigs decodes plugin configurations the way kustomize does.
func pluginConfigs() *resmap.Factory {
	return resmap.NewFactory(provider.NewDepProvider().GetResourceFactory())
}

// checkPluginEntry checks one entry of a kustomization's generators,
// transformers or validators (field): kustomize reads it as inline
// configuration when it decodes as objects, else as a path, which the
// engine requires to be a file of the repository (a folder would be built
// as a kustomization, whose patches could produce a configuration that
// could not be checked here).
func checkPluginEntry(files map[string][]byte, kust, field, entry string) error {
	if rm, err := pluginConfigs().NewResMapFromBytes([]byte(entry)); err == nil {
		return checkPluginConfigs(kust, field, "", rm)
	}
	if remoteRef(entry) {
		return remoteError(kust, field, entry)
	}
	p := resolve(path.Dir(kust), entry)
	content, ok := files[p]
	if !ok {
		prefix := p + "/"
		for name := range files {
			if strings.HasPrefix(name, prefix) || p == "" {
				return &RenderError{File: kust, Msg: fmt.Sprintf("%s: %q is a folder; a generator, transformer or validator must be inline or a file of the repository", field, entry)}
			}
		}
		return &RenderError{File: kust, Msg: fmt.Sprintf("%s: %q is not a file of the repository", field, entry)}
	}
	rm, err := pluginConfigs().NewResMapFromBytes(content)
	if err != nil {
		return &RenderError{File: kust, Msg: fmt.Sprintf("%s: %s cannot be read: %v", field, p, err)}
	}
	return checkPluginConfigs(kust, field, p, rm)
}

// checkPluginConfigs checks the configurations rm of a generator,
// transformer or validator (from file, or inline when file is "").
func checkPluginConfigs(kust, field, file string, rm resmap.ResMap) error {
	where := field
	if file != "" {
		where = field + " (" + file + ")"
	}
	for i, r := range rm.Resources() {
		m, err := r.Map()
		if err != nil {
			return &RenderError{File: kust, Msg: fmt.Sprintf("%s: %v", where, err)}
		}
		at := where
		if rm.Size() > 1 {
			at = fmt.Sprintf("%s document %d", where, i+1)
		}
		if kind, _ := m["kind"].(string); strings.EqualFold(kind, "HelmChartInflationGenerator") {
			return &RenderError{File: kust, Msg: at + ": the engine does not run Helm; it renders only what the repository holds (commit the chart's rendered manifests)"}
		}
		if p, v, bad := findRemote(m, ""); bad {
			return remoteError(kust, at+" "+p, v)
		}
	}
	return nil
}

// resolve is the repository path kustomize reads for entry, named in the
// kustomization in folder dir: the in-memory file system's root is the
// repository's.
func resolve(dir, entry string) string {
	if strings.HasPrefix(entry, "/") {
		return strings.TrimPrefix(path.Clean(entry), "/")
	}
	return strings.TrimPrefix(path.Join("/", dir, entry), "/")
}

// dataFields hold values kustomize only copies into objects and never
// loads: a URL there (an annotation linking to docs, a literal API_URL=…,
// an inline patch setting one) is data.
var dataFields = []string{"metadata", "annotations", "commonAnnotations", "labels", "commonLabels", "literals", "patch", "jsonOp"}

func isDataField(key string, v any) bool {
	for _, f := range dataFields {
		if strings.EqualFold(key, f) {
			return true
		}
	}
	// PatchStrategicMergeTransformer's inline patches (a kustomization's
	// patches is a list).
	_, isString := v.(string)
	return isString && strings.EqualFold(key, "patches")
}

// findRemote walks a decoded YAML value and answers the field path (at,
// extended) and value of the first string in it that is remote, skipping
// dataFields.
func findRemote(v any, at string) (string, string, bool) {
	switch x := v.(type) {
	case string:
		if remoteRef(x) {
			return at, x, true
		}
	case []any:
		for i, e := range x {
			if p, s, bad := findRemote(e, fmt.Sprintf("%s[%d]", at, i)); bad {
				return p, s, true
			}
		}
	case map[string]any:
		for _, k := range sortedKeys(x) {
			if isDataField(k, x[k]) {
				continue
			}
			p := k
			if at != "" {
				p = at + "." + k
			}
			if p, s, bad := findRemote(x[k], p); bad {
				return p, s, true
			}
		}
	}
	return "", "", false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

var (
	schemeRE = regexp.MustCompile(`^(?:[A-Za-z][A-Za-z0-9+.-]*://|(?i:https?:))`)
	scpRE    = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]*@\S`) // git@github.com:org/repo
)

// remoteRef reports whether r, as a path kustomize loads, names something
// outside the repository: a URL (any scheme://, or http: or https:, which
// kustomize fetches over HTTP(S) or clones), a git reference (git@host:…,
// user@host:…, git::…, github.com/…, …?ref=…, ….git//…), also as the path
// of a "key=path" file source. Inline content (a value of several lines) is
// not a path, so only how it starts counts there.
func remoteRef(r string) bool {
	r = strings.TrimSpace(r)
	if !strings.Contains(r, "\n") && strings.Contains(r, "://") {
		return true
	}
	if remotePrefix(r) {
		return true
	}
	if _, after, ok := strings.Cut(r, "="); ok && remotePrefix(strings.TrimSpace(after)) {
		return true
	}
	return false
}

func remotePrefix(r string) bool {
	first, _, _ := strings.Cut(r, "\n")
	first = strings.TrimSpace(first)
	lower := strings.ToLower(first)
	if schemeRE.MatchString(first) || scpRE.MatchString(first) || strings.HasPrefix(lower, "git::") {
		return true
	}
	for _, host := range []string{"github.com", "gitlab.com", "bitbucket.org", "dev.azure.com", "ssh.dev.azure.com"} {
		if strings.HasPrefix(lower, host+"/") || strings.HasPrefix(lower, host+":") {
			return true
		}
	}
	return strings.Contains(first, "?ref=") || strings.Contains(first, ".git//")
}
