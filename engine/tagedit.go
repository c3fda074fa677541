package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// ErrNoTag is an App whose document declares no spec.image.tag to edit.
var ErrNoTag = errors.New("the App declares no spec.image.tag")

// EditTag rewrites spec.image.tag of the App namespace/name in a YAML file
// of one or more documents and returns the new content and the tag it
// replaced. Only the tag's bytes change: the edit is a splice at the
// scalar's position, in the scalar's own quoting, so comments, key order
// and every other byte are kept. A document naming no namespace matches
// defaultNS. changed is false when the tag is already declared.
func EditTag(content []byte, namespace, name, defaultNS, tag string) (out []byte, old string, changed bool, err error) {
	if !cleanTag(tag) {
		return nil, "", false, fmt.Errorf("tag %q is not a plain image tag", tag)
	}
	node, err := findTag(content, namespace, name, defaultNS)
	if err != nil {
		return nil, "", false, err
	}
	if node.Value == tag {
		return content, node.Value, false, nil
	}
	start, end, err := scalarSpan(content, node)
	if err != nil {
		return nil, "", false, err
	}
	var repl string
	switch node.Style {
	case yaml.DoubleQuotedStyle:
		repl = `"` + tag + `"`
	case yaml.SingleQuotedStyle:
		repl = `'` + tag + `'`
	default:
		repl = tag
	}
	out = make([]byte, 0, len(content)-(end-start)+len(repl))
	out = append(append(append(out, content[:start]...), repl...), content[end:]...)
	return out, node.Value, true, nil
}

// cleanTag admits the characters of an image tag ([A-Za-z0-9_.-], at most
// 128, not starting with . or -): such a tag needs no quoting in YAML.
func cleanTag(tag string) bool {
	if tag == "" || len(tag) > 128 || tag[0] == '.' || tag[0] == '-' {
		return false
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

// findTag finds the scalar node of the App's spec.image.tag. The whole
// file is read first: a file with a document that does not parse, or one
// that declares the App twice, is refused, so an edit never writes back a
// file that was broken past the App it changed.
func findTag(content []byte, namespace, name, defaultNS string) (*yaml.Node, error) {
	dec := yaml.NewDecoder(bytes.NewReader(content))
	var tag *yaml.Node
	found, first := false, 0
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the file is not YAML: %v", err)
		}
		if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
			continue
		}
		root := doc.Content[0]
		if str(get(root, "kind")) != "App" {
			continue
		}
		md := get(root, "metadata")
		ns := str(get(md, "namespace"))
		if ns == "" {
			ns = defaultNS
		}
		if str(get(md, "name")) != name || ns != namespace {
			continue
		}
		if found {
			return nil, fmt.Errorf("the file declares App %s/%s twice (lines %d and %d); keep one", namespace, name, first, root.Line)
		}
		found, first = true, root.Line
		if t := get(get(get(root, "spec"), "image"), "tag"); t != nil && t.Kind == yaml.ScalarNode && t.Tag != "!!null" {
			tag = t
		}
	}
	if !found {
		return nil, fmt.Errorf("the file declares no App %s/%s", namespace, name)
	}
	if tag == nil {
		return nil, ErrNoTag
	}
	return tag, nil
}

func get(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

func str(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}

// scalarSpan is the byte range of a one-line scalar in content, quotes
// included. A scalar over several lines, or one whose bytes do not read
// back as its value, is refused rather than guessed at.
func scalarSpan(content []byte, n *yaml.Node) (int, int, error) {
	refuse := fmt.Errorf("spec.image.tag at line %d is not a one-line scalar the edit can keep byte for byte", n.Line)
	off := 0
	for l := 1; l < n.Line; l++ {
		i := bytes.IndexByte(content[off:], '\n')
		if i < 0 {
			return 0, 0, refuse
		}
		off += i + 1
	}
	for c := 1; c < n.Column; c++ { // columns count characters
		if off >= len(content) || content[off] == '\n' {
			return 0, 0, refuse
		}
		_, size := utf8.DecodeRune(content[off:])
		off += size
	}
	var raw string
	switch n.Style {
	case yaml.DoubleQuotedStyle:
		raw = `"` + n.Value + `"`
	case yaml.SingleQuotedStyle:
		raw = `'` + n.Value + `'`
	case 0:
		raw = n.Value
	default:
		return 0, 0, refuse
	}
	end := off + len(raw)
	if end > len(content) || string(content[off:end]) != raw {
		return 0, 0, refuse
	}
	if end < len(content) && content[end] != '\n' && content[end] != '\r' && content[end] != ' ' && content[end] != '\t' && content[end] != ',' && content[end] != '}' {
		return 0, 0, refuse
	}
	return off, end, nil
}
