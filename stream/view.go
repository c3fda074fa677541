package stream

import (
	"sync/atomic"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// view is one distinct way of watching: a scope (by its key) and a filter.
// Every event is encoded once per view that sees it, and the same bytes go
// to each of its subscribers. Everything but subs is immutable; subs is
// guarded by Hub.mu.
type view struct {
	key    string
	scope  auth.Scope
	filter AppFilter
	fields *fieldTree // nil: whole events
	subs   []*subscriber
	// held is the newest frame of the batch being fanned out, held back
	// to carry the batch's id (in Hub.idViews while set); heldRev,
	// heldPos and heldCluster are its record's.
	held        []byte
	heldRev     uint64
	heldPos     projection.Position
	heldCluster uint16
	heldCond    bool
}

func newView(scope auth.Scope, f AppFilter) *view {
	return &view{
		key:    scope.Key() + "\x00" + f.key(),
		scope:  scope,
		filter: f,
		fields: f.Fields.compile(),
	}
}

// sees reports whether one version of a row passes the scope and filter.
func (v *view) sees(row projection.RowKind, k projection.AppKey, at rowAttrs) bool {
	return visible(v.scope, row, k.Namespace, at.org) && v.filter.match(k, at)
}

// frame is the record as this view's event, or nil when the view sees
// nothing of it. A version the view saw that it no longer sees is a
// DELETED carrying that version; one it starts to see is an ADDED.
func (v *view) frame(rec *record, encodings *atomic.Uint64) []byte {
	oldSeen := rec.hasOld && v.sees(rec.row, rec.key, rec.old)
	newSeen := rec.hasNew && v.sees(rec.row, rec.key, rec.new)
	var typ projection.EventType
	var app []byte
	switch {
	case oldSeen && newSeen:
		if !rec.appChanged {
			return nil
		}
		typ, app = projection.Modified, rec.newJSON
	case newSeen:
		typ, app = projection.Added, rec.newJSON
	case oldSeen:
		typ, app = projection.Deleted, rec.oldJSON
	default:
		return nil
	}
	encodings.Add(1)
	return v.encode(typ, app)
}

// The pieces of a frame: "data: {"result":{"type":…,"application":…}}\n\n".
const (
	frameHead = `{"result":{"type":"`
	frameMid  = `","application":`
	frameTail = `}}`
)

// The head and end of an ADDED frame without fields, made once.
var (
	addedHead = []byte("data: " + frameHead + string(projection.Added) + frameMid)
	frameEnd  = []byte(frameTail + "\n\n")
)

// writeAdded writes the ADDED frame of app that encode would build,
// straight to out: without fields, in pieces, so that a burst of thousands
// of events to thousands of clients builds no frame of its own for each.
func (v *view) writeAdded(out *eventWriter, app []byte) {
	if v.fields != nil {
		out.write(v.encode(projection.Added, app))
		return
	}
	out.write(addedHead)
	out.write(app)
	out.write(frameEnd)
}

// encode builds one SSE frame, "data: {"result":{"type":…,"application":…}}\n\n",
// trimmed to the view's fields.
func (v *view) encode(typ projection.EventType, app []byte) []byte {
	size := len("data: \n\n") + len(frameHead) + len(typ) + len(frameMid) + len(app) + len(frameTail)
	if v.fields == nil {
		b := make([]byte, 0, size)
		b = append(b, "data: "+frameHead...)
		b = append(b, typ...)
		b = append(b, frameMid...)
		b = append(b, app...)
		return append(b, frameTail+"\n\n"...)
	}
	doc := make([]byte, 0, size)
	doc = append(doc, frameHead...)
	doc = append(doc, typ...)
	doc = append(doc, frameMid...)
	doc = append(doc, app...)
	doc = append(doc, frameTail...)
	if trimmed, err := v.fields.apply(doc); err == nil {
		doc = trimmed
	} // else: the encoded Application is always valid JSON; send it whole rather than lose the event
	b := make([]byte, 0, len(doc)+len("data: \n\n"))
	b = append(b, "data: "...)
	b = append(b, doc...)
	return append(b, "\n\n"...)
}

func appendID(b []byte, pos projection.Position) []byte {
	if pos.IsZero() {
		return b
	}
	b = append(b, "id: "...)
	b = pos.AppendID(b)
	return append(b, '\n')
}

// rows returns the rows of a snapshot the view sees, in list order.
func (v *view) rows(snap *projection.Snapshot) []*projection.App {
	var out []*projection.App
	keep := func(a *projection.App) {
		if Visible(v.scope, a) && v.filter.Matches(a) {
			out = append(out, a)
		}
	}
	switch {
	case v.scope.IsAll():
		for a := range snap.Apps() {
			keep(a)
		}
		for _, a := range snap.CDApplications() {
			keep(a)
		}
	case v.scope.Namespace() != "":
		nss := snap.Namespaces()
		ns := v.scope.Namespace()
		lo, hi := 0, len(nss)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if nss[m].Namespace < ns {
				lo = m + 1
			} else {
				hi = m
			}
		}
		if lo < len(nss) && nss[lo].Namespace == ns {
			for _, a := range nss[lo].Rows {
				keep(a)
			}
		}
		for _, nr := range snap.TenantElsewhere(auth.TenantNamespacePrefix, v.scope.Org()) {
			for _, a := range nr.Rows {
				keep(a)
			}
		}
	}
	return out
}
