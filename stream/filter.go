package stream

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// AppFilter narrows an applications stream after the caller's Scope, with
// the query parameters of Argo CD's watch. The zero AppFilter passes every
// application the Scope sees and sends whole events.
type AppFilter struct {
	// Names keeps the applications with one of these names (Argo CD's
	// name parameter; empty: any).
	Names []string
	// Projects keeps the applications of one of these projects (empty:
	// any).
	Projects []string
	// Selector is matched against the Application's metadata.labels
	// (hanzo.ai/instance, hanzo.ai/env, hanzo.ai/org); nil matches all.
	Selector labels.Selector
	// AppNamespace keeps the applications of one namespace ("" any).
	AppNamespace string
	// Fields trims each event to a whitelist of paths (or drops a
	// blacklist); the zero Fields sends whole events.
	Fields Fields
}

// Request is one applications stream, as the handler parsed and
// authenticated it.
type Request struct {
	// Scope is the caller's, from its validated token: applied to every
	// event before anything else.
	Scope  auth.Scope
	Filter AppFilter
	// ResourceVersion continues after a list at that position (zero: none):
	// only the changes after it are sent.
	ResourceVersion projection.Position
	// LastEventID resumes after the last event a client received (0:
	// none). It wins over ResourceVersion: it is the newer position.
	LastEventID projection.Position
	// LastEventRef is the Last-Event-ID when it is a compact id
	// (projection.Position.AppendID); the hub maps it back to LastEventID,
	// and resets a client whose id no replica holds.
	LastEventRef string
	// Expiry ends the stream when the caller's credential expires (zero:
	// never).
	Expiry time.Time
}

// streamParams are the query parameters of the applications stream.
var streamParams = []string{"name", "projects", "selector", "appNamespace", "fields", "resourceVersion"}

// ParseRequest reads the query of GET /v1/deploy/stream/applications and
// the Last-Event-ID header, positions of the clusters named by clusters
// (projection.Config.ClusterNames). The caller sets Scope and Expiry.
// Every error is a client mistake with a message that says what to change
// (a 400).
func ParseRequest(r *http.Request, clusters []string) (Request, error) {
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(streamParams, k) {
			return Request{}, fmt.Errorf("unknown query parameter %s; this route takes %s", quoteShort(k), strings.Join(streamParams, ", "))
		}
	}
	var req Request
	var err error
	if req.Filter, err = ParseAppFilter(q); err != nil {
		return Request{}, err
	}
	if rv, err := single(q, "resourceVersion"); err != nil {
		return Request{}, err
	} else if req.ResourceVersion, err = ParseResourceVersion(rv, clusters); err != nil {
		return Request{}, err
	}
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); projection.IsID(id) {
		if err := projection.CheckID(id); err != nil {
			return Request{}, fmt.Errorf("Last-Event-ID %s is not an event id of this stream: %w; reconnect without it to start over", quoteShort(id), err)
		}
		req.LastEventRef = id
	} else if req.LastEventID, err = ParseLastEventID(id, clusters); err != nil {
		return Request{}, err
	}
	return req, nil
}

// ParseAppFilter reads name (repeatable), projects (repeatable or
// comma-separated), selector, appNamespace and fields. Other keys are left
// to the caller.
func ParseAppFilter(q url.Values) (AppFilter, error) {
	var f AppFilter
	for _, v := range q["name"] {
		if v == "" {
			continue
		}
		if !projection.IsLabel(v) {
			return AppFilter{}, fmt.Errorf("name %s is not an application name: it must be a DNS-1123 label (lower-case letters, digits and '-', at most 63 characters)", quoteShort(v))
		}
		f.Names = append(f.Names, v)
	}
	for _, v := range q["projects"] {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p == "" {
				continue
			}
			if errs := validation.IsValidLabelValue(p); len(errs) > 0 {
				return AppFilter{}, fmt.Errorf("project %s is not a project name: %s", quoteShort(p), errs[0])
			}
			f.Projects = append(f.Projects, p)
		}
	}
	sel, err := single(q, "selector")
	if err != nil {
		return AppFilter{}, err
	}
	if f.Selector, err = ParseSelector(sel); err != nil {
		return AppFilter{}, err
	}
	if f.AppNamespace, err = single(q, "appNamespace"); err != nil {
		return AppFilter{}, err
	}
	if f.AppNamespace != "" {
		if !projection.IsNamespace(f.AppNamespace) {
			return AppFilter{}, fmt.Errorf("appNamespace %s is not a namespace name: it must be a DNS-1123 label, or one followed by '.' and a cluster's name", quoteShort(f.AppNamespace))
		}
	}
	fields, err := single(q, "fields")
	if err != nil {
		return AppFilter{}, err
	}
	if f.Fields, err = ParseFields(fields); err != nil {
		return AppFilter{}, err
	}
	return f, nil
}

// ParseSelector reads a label selector ("hanzo.ai/env=main,hanzo.ai/org in
// (acme)"); "" is nil, which matches everything.
func ParseSelector(s string) (labels.Selector, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	sel, err := labels.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("selector %s is not a label selector (for example hanzo.ai/env=main,hanzo.ai/org in (acme)): %w", quoteShort(s), err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("selector %s has no requirement; leave it out to select everything", quoteShort(s))
	}
	return sel, nil
}

func single(q url.Values, key string) (string, error) {
	switch v := q[key]; len(v) {
	case 0:
		return "", nil
	case 1:
		return v[0], nil
	}
	return "", errors.New("query parameter " + key + " is given more than once")
}

// Visible reports whether a scope may see an application row: the Scope
// predicate for operator Apps and sites, SuperAdmins only for CD
// Applications. It is the one visibility rule: every event passes it
// first, and every list the routes answer keeps only the rows it admits.
func Visible(scope auth.Scope, a *projection.App) bool {
	// The whole fleet's scope is decided without touching the row: a list
	// of every row reads no row's fields for it.
	return scope.IsAll() || visible(scope, a.Row, a.Namespace, a.Org)
}

func visible(scope auth.Scope, row projection.RowKind, namespace, org string) bool {
	if row == projection.RowCD {
		return scope.IsAll()
	}
	return scope.Sees(namespace, org)
}

// Matches reports whether the filter keeps an application row (the scope
// is not checked here: see Visible).
func (f *AppFilter) Matches(a *projection.App) bool {
	return f.match(a.Key(), rowAttrs{org: a.Org, project: a.Project, env: a.Env})
}

// rowAttrs are the parts of a row version that scope and filters read,
// besides its key and row kind (fixed for a row).
type rowAttrs struct {
	org, project, env string
}

func (f *AppFilter) match(k projection.AppKey, at rowAttrs) bool {
	if len(f.Names) > 0 && !slices.Contains(f.Names, k.Name) {
		return false
	}
	if f.AppNamespace != "" && k.Namespace != f.AppNamespace {
		return false
	}
	if len(f.Projects) > 0 && !slices.Contains(f.Projects, at.project) {
		return false
	}
	if f.Selector != nil && !f.Selector.Matches(appLabels{name: k.Name, env: at.env, org: at.org}) {
		return false
	}
	return true
}

// key is the filter in a canonical form, part of a view key: equal keys
// select the same events and encode them the same way.
func (f *AppFilter) key() string {
	names := slices.Clone(f.Names)
	slices.Sort(names)
	projects := slices.Clone(f.Projects)
	slices.Sort(projects)
	sel := ""
	if f.Selector != nil {
		sel = f.Selector.String()
	}
	var b strings.Builder
	for _, part := range []string{strings.Join(slices.Compact(names), ","), strings.Join(slices.Compact(projects), ","), sel, f.AppNamespace, f.Fields.String()} {
		b.WriteString(part)
		b.WriteByte(0)
	}
	return b.String()
}

// appLabels are an Application's metadata.labels as projection emits them,
// without building a map.
type appLabels struct{ name, env, org string }

func (l appLabels) Lookup(key string) (string, bool) {
	switch key {
	case projection.LabelInstance:
		return l.name, true
	case projection.LabelEnv:
		return l.env, l.env != ""
	case projection.LabelOrg:
		return l.org, l.org != ""
	}
	return "", false
}

func (l appLabels) Has(key string) bool   { _, ok := l.Lookup(key); return ok }
func (l appLabels) Get(key string) string { v, _ := l.Lookup(key); return v }
