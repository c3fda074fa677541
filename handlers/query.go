package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"

	"github.com/hanzoai/deploy/stream"

	"github.com/labstack/echo/v4"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hanzoai/deploy/projection"
)

// validName checks a name taken from a path or a query: a DNS-1123 label,
// as every App, namespace and org name is.
func validName(what, name string) error {
	if !projection.IsLabel(name) {
		return errorf(http.StatusBadRequest, what+" "+quoteShort(name)+" is not valid: it must be a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)")
	}
	return nil
}

// validNamespace checks a namespace taken from a path, a query or a body:
// a DNS-1123 label, qualified with a cluster's name for a cluster other
// than the first (projection.IsNamespace).
func validNamespace(what, ns string) error {
	if !projection.IsNamespace(ns) {
		return errorf(http.StatusBadRequest, what+" "+quoteShort(ns)+" is not valid: it must be a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters), or one followed by '.' and a cluster's name")
	}
	return nil
}

// quoteShort quotes a client-given value for a message, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// checkParams refuses query parameters a route does not know: a typo must
// not silently change what is listed.
func checkParams(q url.Values, known ...string) error {
	for k := range q {
		if !slices.Contains(known, k) {
			return errorf(http.StatusBadRequest, "unknown query parameter "+quoteShort(k)+"; this route takes "+strings.Join(known, ", "))
		}
	}
	return nil
}

// single returns the one value of a parameter, refusing repeats.
func single(q url.Values, key string) (string, error) {
	v := q[key]
	if len(v) > 1 {
		return "", errorf(http.StatusBadRequest, "query parameter "+key+" is given more than once")
	}
	if len(v) == 0 {
		return "", nil
	}
	return v[0], nil
}

// optionalName reads an optional parameter that names something (an org,
// a namespace, an app): absent is "", present must be a DNS-1123 label.
func optionalName(q url.Values, key string) (string, error) {
	v, err := single(q, key)
	if err != nil || v == "" {
		return v, err
	}
	check := validName
	if key == "namespace" || key == "appNamespace" {
		check = validNamespace
	}
	if err := check(key, v); err != nil {
		return "", err
	}
	return v, nil
}

// listQuery is the filter of GET /v1/deploy/applications.
type listQuery struct {
	// resourceVersion: the position the list must be at least at (0:
	// any). Not part of the key: it names no content.
	resourceVersion projection.Position
	name            string
	projects        []string
	selector        labels.Selector
	selectorText    string
	appNamespace    string
	fields          [][]string
	fieldsText      string
}

var listParams = []string{"name", "projects", "selector", "appNamespace", "fields", "refresh", "resourceVersion"}

func parseListQuery(q url.Values, clusters []string) (listQuery, error) {
	var lq listQuery
	if err := checkParams(q, listParams...); err != nil {
		return lq, err
	}
	if err := checkRefresh(q); err != nil {
		return lq, err
	}
	rv, err := single(q, "resourceVersion")
	if err != nil {
		return lq, err
	}
	if lq.resourceVersion, err = stream.ParseResourceVersion(rv, clusters); err != nil {
		return lq, errorf(http.StatusBadRequest, err.Error())
	}
	if lq.name, err = optionalName(q, "name"); err != nil {
		return lq, err
	}
	for _, v := range q["projects"] {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if err := validName("project", p); err != nil {
				return lq, err
			}
			lq.projects = append(lq.projects, p)
		}
	}
	sort.Strings(lq.projects)
	lq.projects = slices.Compact(lq.projects)
	if lq.selectorText, err = single(q, "selector"); err != nil {
		return lq, err
	}
	if lq.selectorText != "" {
		sel, err := labels.Parse(lq.selectorText)
		if err != nil {
			return lq, errorf(http.StatusBadRequest, "selector "+quoteShort(lq.selectorText)+" is not a label selector (for example hanzo.ai/env=main,hanzo.ai/org in (acme))")
		}
		lq.selector, lq.selectorText = sel, sel.String()
	}
	if lq.appNamespace, err = optionalName(q, "appNamespace"); err != nil {
		return lq, err
	}
	fieldsText, err := single(q, "fields")
	if err != nil {
		return lq, err
	}
	if lq.fields, err = parseFields(fieldsText); err != nil {
		return lq, err
	}
	lq.fieldsText = fieldsText
	return lq, nil
}

// key is the normalized query, for the response cache.
func (lq listQuery) key() string {
	return "n=" + lq.name + "&p=" + strings.Join(lq.projects, ",") + "&s=" + lq.selectorText + "&ns=" + lq.appNamespace + "&f=" + lq.fieldsText
}

// matches applies the filters after the scope.
func (lq listQuery) matches(a *projection.App) bool {
	if lq.name != "" && a.Name != lq.name {
		return false
	}
	if lq.appNamespace != "" && a.Namespace != lq.appNamespace {
		return false
	}
	if len(lq.projects) > 0 && !slices.Contains(lq.projects, a.Project) {
		return false
	}
	if lq.selector != nil && !lq.selector.Matches(appLabels(a)) {
		return false
	}
	return true
}

// appLabels are the labels of the Application as emitted.
func appLabels(a *projection.App) labels.Set {
	set := labels.Set{projection.LabelInstance: a.Name}
	if a.Env != "" {
		set[projection.LabelEnv] = a.Env
	}
	if a.Org != "" {
		set[projection.LabelOrg] = a.Org
	}
	return set
}

// listFields is the syntax of a list's fields: paths into the list.
var listFieldsSyntax = stream.FieldsSyntax{Doc: "list", Roots: []string{"items", "metadata", "apiVersion", "kind"},
	Example: "items.metadata.name,items.status.sync.status,metadata.resourceVersion"}

// parseFields reads Argo CD's fields parameter of a list (the one parser,
// stream.FieldsSyntax): the paths to keep, split at their dots. A list
// keeps fields; excluding them ("-") is for streams.
func parseFields(text string) ([][]string, error) {
	f, err := listFieldsSyntax.Parse(text)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, err.Error())
	}
	if f.Exclude {
		return nil, errorf(http.StatusBadRequest, "a list's fields name what to keep: a leading - (exclude) is for streams")
	}
	var out [][]string
	for _, p := range f.Paths {
		out = append(out, strings.Split(p, "."))
	}
	return out, nil
}

// selectFields keeps only the given paths of a decoded JSON document;
// arrays pass the rest of the path to each element.
func selectFields(doc any, paths [][]string) any {
	var out any
	for _, p := range paths {
		out = mergeField(out, doc, p)
	}
	if out == nil {
		return map[string]any{}
	}
	return out
}

func mergeField(dst, src any, path []string) any {
	if len(path) == 0 {
		return src
	}
	switch s := src.(type) {
	case map[string]any:
		v, ok := s[path[0]]
		if !ok {
			return dst
		}
		d, _ := dst.(map[string]any)
		if d == nil {
			d = map[string]any{}
		}
		d[path[0]] = mergeField(d[path[0]], v, path[1:])
		return d
	case []any:
		d, _ := dst.([]any)
		if d == nil {
			d = make([]any, len(s))
		}
		for i := range s {
			d[i] = mergeField(d[i], s[i], path)
		}
		return d
	}
	return dst
}

func marshalJSON(v any) ([]byte, error) { return json.Marshal(v) }

// listFields reads a list route's fields parameter (Argo CD's field
// selection, as on the applications list).
func listFields(q url.Values) ([][]string, error) {
	text, err := single(q, "fields")
	if err != nil {
		return nil, err
	}
	return parseFields(text)
}

// jsonFields answers v as JSON, cut to the given fields when there are any.
func jsonFields(c echo.Context, v any, fields [][]string) error {
	if fields == nil {
		return c.JSON(http.StatusOK, v)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		return err
	}
	return c.JSON(http.StatusOK, selectFields(doc, fields))
}
