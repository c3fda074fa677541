package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// Doc is one rendered object and where it was declared.
type Doc struct {
	Object *unstructured.Unstructured
	File   string // path in the repository (for a kustomize build, the kustomization's)
	Line   int    // first line of its document (1-based; 0 for a kustomize build)
}

// RenderError is a rendering that failed; its text names the file and line
// and is safe for a client.
type RenderError struct {
	File  string
	Line  int
	Msg   string
	cause error // ctx.Err() for a render its context ended
}

// Unwrap answers the context's error when the render ran past its context.
func (e *RenderError) Unwrap() error { return e.cause }

func (e *RenderError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("render %s:%d: %s", e.File, e.Line, e.Msg)
	}
	if e.File != "" {
		return fmt.Sprintf("render %s: %s", e.File, e.Msg)
	}
	return "render: " + e.Msg
}

// Render turns the files under dir into objects: the kustomization's build
// when dir holds one, else every *.yaml, *.yml and *.json under dir,
// recursively, in sorted path order, each document in file order. Empty and
// comment-only documents are skipped. files maps slash-separated paths
// relative to the repository root to their content. Any error fails the
// whole rendering. It runs under ctx: when ctx ends first, it answers a
// RenderError saying the render ran past the run's deadline (errors.Is
// finds ctx.Err() in it).
func Render(ctx context.Context, files map[string][]byte, dir string) ([]Doc, error) {
	dir = cleanDir(dir)
	if ctx.Err() != nil {
		return nil, pastDeadline(ctx, dir)
	}
	for _, name := range kustomizationNames {
		if _, ok := files[path.Join(dir, name)]; ok {
			return renderKustomize(ctx, files, dir)
		}
	}
	prefix := ""
	if dir != "" {
		prefix = dir + "/"
	}
	var names []string
	for name := range files {
		if strings.HasPrefix(name, prefix) && manifestFile(name) {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out []Doc
	for _, name := range names {
		if ctx.Err() != nil {
			return nil, pastDeadline(ctx, dir)
		}
		docs, err := renderFile(name, files[name])
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	return out, nil
}

func manifestFile(name string) bool {
	switch strings.ToLower(path.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// renderFile splits one file into its documents and decodes each.
func renderFile(name string, content []byte) ([]Doc, error) {
	var out []Doc
	for _, d := range splitDocuments(content) {
		objs, err := decodeDocument(d.body)
		if err != nil {
			line := d.line
			if n, ok := errorLine(err); ok {
				line = d.line + n - 1
			}
			return nil, &RenderError{File: name, Line: line, Msg: cleanYAMLError(err)}
		}
		for _, o := range objs {
			out = append(out, Doc{Object: o, File: name, Line: d.line})
		}
	}
	return out, nil
}

type document struct {
	body []byte
	line int // the document's first line in the file
}

// splitDocuments cuts a YAML stream at lines that are "---" (optionally
// followed by a space or a comment), keeping each document's first line.
func splitDocuments(content []byte) []document {
	var docs []document
	start, startLine, line := 0, 1, 1
	for i := 0; i <= len(content); {
		end := bytes.IndexByte(content[i:], '\n')
		var l []byte
		next := len(content) + 1
		if end < 0 {
			l = content[i:]
		} else {
			l = content[i : i+end]
			next = i + end + 1
		}
		if separator(l) {
			docs = append(docs, document{body: content[start:i], line: startLine})
			start, startLine = min(next, len(content)), line+1
		}
		i = next
		line++
	}
	docs = append(docs, document{body: content[start:], line: startLine})
	return docs
}

func separator(l []byte) bool {
	l = bytes.TrimRight(l, "\r")
	if !bytes.HasPrefix(l, []byte("---")) {
		return false
	}
	rest := l[3:]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '#'
}

// decodeDocument decodes one document into objects: none when it is empty
// or holds only comments, the items of a v1 List, else the one object.
func decodeDocument(body []byte) ([]*unstructured.Unstructured, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, nil
	}
	j, err := yaml.YAMLToJSON(body)
	if err != nil {
		return nil, err
	}
	j = bytes.TrimSpace(j)
	if bytes.Equal(j, []byte("null")) {
		return nil, nil
	}
	if len(j) == 0 || j[0] != '{' {
		return nil, fmt.Errorf("the document is not an object (want apiVersion, kind, metadata…)")
	}
	var m map[string]any
	if err := json.Unmarshal(j, &m); err != nil {
		return nil, err
	}
	if kind, _ := m["kind"].(string); kind == "List" {
		items, ok := m["items"].([]any)
		if !ok && m["items"] != nil {
			return nil, fmt.Errorf("a List's items are not a list")
		}
		var out []*unstructured.Unstructured
		for i, it := range items {
			o, ok := it.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("item %d of the List is not an object", i)
			}
			u, err := toObject(o)
			if err != nil {
				return nil, fmt.Errorf("item %d of the List: %w", i, err)
			}
			out = append(out, u)
		}
		return out, nil
	}
	u, err := toObject(m)
	if err != nil {
		return nil, err
	}
	return []*unstructured.Unstructured{u}, nil
}

// toObject checks the fields every object needs. Its numbers must already
// be int64 or float64, as the API server's JSON decodes them
// (normalizeNumbers).
func toObject(m map[string]any) (*unstructured.Unstructured, error) {
	av, _ := m["apiVersion"].(string)
	kind, _ := m["kind"].(string)
	if av == "" || kind == "" {
		return nil, fmt.Errorf("the object has no apiVersion or no kind")
	}
	md, ok := m["metadata"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s has no metadata", kind)
	}
	if name, _ := md["name"].(string); name == "" {
		if _, gen := md["generateName"]; gen {
			return nil, fmt.Errorf("%s uses generateName, which the engine cannot track; name it", kind)
		}
		return nil, fmt.Errorf("%s has no metadata.name", kind)
	}
	if ns, present := md["namespace"]; present {
		if _, ok := ns.(string); !ok && ns != nil {
			return nil, fmt.Errorf("%s's metadata.namespace is not a string", kind)
		}
	}
	for _, f := range []string{"labels", "annotations"} {
		if v, present := md[f]; present && v != nil {
			mm, ok := v.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s's metadata.%s is not a map", kind, f)
			}
			for k, val := range mm {
				if _, ok := val.(string); !ok {
					return nil, fmt.Errorf("%s's metadata.%s[%q] is not a string", kind, f, k)
				}
			}
		}
	}
	return &unstructured.Unstructured{Object: normalizeNumbers(m).(map[string]any)}, nil
}

func normalizeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = normalizeNumbers(e)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = normalizeNumbers(e)
		}
		return x
	case float64:
		if x == float64(int64(x)) && x >= -1<<53 && x <= 1<<53 {
			return int64(x)
		}
		return x
	case float32:
		return normalizeNumbers(float64(x))
	case int:
		return int64(x)
	case int32:
		return int64(x)
	case uint:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		if x <= 1<<63-1 {
			return int64(x)
		}
		return float64(x)
	}
	return v
}

var lineRE = regexp.MustCompile(`line (\d+)`)

// errorLine reads the (document-relative) line a YAML error names.
func errorLine(err error) (int, bool) {
	m := lineRE.FindStringSubmatch(err.Error())
	if m == nil {
		return 0, false
	}
	n, err2 := strconv.Atoi(m[1])
	return n, err2 == nil && n > 0
}

// cleanYAMLError drops the library's "error converting YAML to JSON:" and
// its "line N:" (the file and line lead the message instead).
func cleanYAMLError(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "error converting YAML to JSON: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	if loc := regexp.MustCompile(`^line \d+: `).FindStringIndex(msg); loc != nil {
		msg = msg[loc[1]:]
	}
	return msg
}
