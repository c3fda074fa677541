package stream

import (
	"time"

	"github.com/hanzoai/deploy/projection"
)

// record is one Delta as the streams need it, immutable once built: who
// may see the row before and after, and the encoded Applications (the App
// versions themselves are not kept, so the ring holds bytes, not trees).
type record struct {
	rev        uint64              // this process's revision (contiguous in the ring)
	pos        projection.Position // the clusters' position of the Apply that made it (the event id)
	cluster    uint16              // the row's cluster: pos's part of it is the record's own
	at         int64               // Unix nanoseconds when the hub took it in
	key        projection.AppKey
	row        projection.RowKind
	appChanged bool
	// cond: the Apply that made it changed its cluster's condition (the
	// mark of pos's part, projection.Position.Down): every row of the
	// cluster is sent again, at a resourceVersion that may not move.
	cond     bool
	hasOld   bool
	hasNew   bool
	old, new rowAttrs
	// newJSON is the Application after the change (nil when deleted or
	// when only the tree changed); oldJSON the one before, kept only when
	// a caller may need it: a deletion, or a change of what decides
	// visibility (org, project).
	newJSON, oldJSON []byte
	// newApp and oldApp are the versions whose Applications newJSON and
	// oldJSON will be, while their encoding waits for fanOut to find out
	// whether anyone can read it (deferred); nil once it is decided.
	newApp, oldApp *projection.App
}

// newRecord makes the record of one delta. With encode false the
// Applications are not encoded yet: fanOut encodes them if a stream may
// read them, or drops the versions. Before the first sync, with no stream
// open, nothing reads a record's Applications (the ring is emptied at
// sync), so the initial lists' thousands of rows are not encoded for it.
func newRecord(d *projection.Delta, at int64, encode bool) *record {
	rec := &record{rev: d.Revision, pos: d.Position, cluster: d.Cluster, at: at, key: d.Key, row: d.Row, appChanged: d.AppChanged}
	if d.Old != nil {
		rec.hasOld, rec.old = true, attrsOf(d.Old)
	}
	if d.New != nil {
		rec.hasNew, rec.new = true, attrsOf(d.New)
	}
	if !rec.appChanged && rec.hasOld == rec.hasNew && rec.old == rec.new {
		return rec // only the tree changed: nothing for the applications stream
	}
	rec.newApp = d.New
	if d.Old != nil && (d.New == nil || rec.old != rec.new) {
		rec.oldApp = d.Old
	}
	if encode {
		rec.encode()
	}
	return rec
}

// deferred reports whether the record's Applications wait to be encoded.
func (rec *record) deferred() bool { return rec.newApp != nil || rec.oldApp != nil }

// encode encodes the Applications a deferred record waits for.
func (rec *record) encode() {
	if rec.newApp != nil {
		rec.newJSON = rec.newApp.ApplicationJSON()
	}
	if rec.oldApp != nil {
		rec.oldJSON = rec.oldApp.ApplicationJSON()
	}
	rec.newApp, rec.oldApp = nil, nil
}

// seenAt reports whether a client at position p has seen the record's
// change: p's part of the record's cluster is at or past the record's own
// (and, for a change of the cluster's condition at the same
// resourceVersion, marks it alike). Exact across replicas, which fold the
// clusters' changes interleaved in different orders but each cluster's in
// its own order.
func (rec *record) seenAt(p projection.Position) bool {
	c := int(rec.cluster)
	if rec.cond {
		return p.Saw(rec.pos, c)
	}
	return rec.pos.Of(c) <= p.Of(c)
}

func attrsOf(a *projection.App) rowAttrs {
	return rowAttrs{org: a.Org, project: a.Project, env: a.Env}
}

// ring is the resume log: the newest records, contiguous in revision
// (floor, floor+n], their positions never decreasing. Bounded by count;
// old records also leave by age. Guarded by Hub.mu.
type ring struct {
	buf   []*record // circular, oldest at head
	head  int
	n     int
	max   int
	floor uint64 // revisions at or below it are not held
	// floorPos is the position from which the ring holds every change:
	// a client at a position covering it (and not past the newest) is
	// resumed from the ring. Before the first sync it is unknown
	// (floorKnown false).
	floorPos   projection.Position
	floorKnown bool
}

func newRing(max int, floor uint64) *ring {
	return &ring{buf: make([]*record, min(max, 1024)), max: max, floor: floor}
}

// at is the i-th record held, oldest first.
func (r *ring) at(i int) *record { return r.buf[(r.head+i)%len(r.buf)] }

// locate is the revision after which the changes since position p start:
// the newest record p covers, or the floor. p must cover floorPos. The
// records' positions never decrease in any part, so those p covers come
// first.
func (r *ring) locate(p projection.Position) uint64 {
	lo, hi := 0, r.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if p.Covers(r.at(m).pos) {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return r.floor + uint64(lo)
}

// lastPos is the newest position held (floorPos when empty).
func (r *ring) lastPos() projection.Position {
	if r.n == 0 {
		return r.floorPos
	}
	return r.at(r.n - 1).pos
}

// last is the newest revision held (floor when empty).
func (r *ring) last() uint64 { return r.floor + uint64(r.n) }

// oldest is when the oldest record held was taken in; zero when empty.
func (r *ring) oldest() time.Time {
	if r.n == 0 {
		return time.Time{}
	}
	return time.Unix(0, r.buf[r.head].at)
}

// push appends the record of revision last()+1, evicting the oldest when
// full.
func (r *ring) push(rec *record) {
	if r.n == r.max {
		r.popOldest()
	}
	if r.n == len(r.buf) {
		grown := make([]*record, min(2*len(r.buf), r.max))
		for i := range r.n {
			grown[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = grown, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = rec
	r.n++
}

func (r *ring) popOldest() {
	if r.floorKnown {
		r.floorPos = r.floorPos.Max(r.buf[r.head].pos)
	}
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	r.floor++
}

// evictBefore drops the records taken in before t (Unix nanoseconds).
func (r *ring) evictBefore(t int64) {
	for r.n > 0 && r.buf[r.head].at < t {
		r.popOldest()
	}
}

// reset empties the ring at a new floor, from which it holds every change
// after position floorPos (when known).
func (r *ring) reset(floor uint64, floorPos projection.Position, known bool) {
	clear(r.buf)
	r.head, r.n, r.floor, r.floorPos, r.floorKnown = 0, 0, floor, floorPos, known
}

// after appends to dst up to limit records with revisions after pos, in
// order. pos must be at or above floor.
func (r *ring) after(dst []*record, pos uint64, limit int) []*record {
	if pos < r.floor || pos >= r.last() {
		return dst
	}
	i := int(pos - r.floor)
	for ; i < r.n && limit > 0; i, limit = i+1, limit-1 {
		dst = append(dst, r.buf[(r.head+i)%len(r.buf)])
	}
	return dst
}
