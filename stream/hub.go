package stream

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// Source is where the hub reads the current snapshot: a *projection.Store.
type Source interface {
	Snapshot() *projection.Snapshot
}

// Options configure a Hub. Zero values take the defaults.
type Options struct {
	// RingEvents bounds the resume ring (default 100,000 events).
	RingEvents int
	// RingAge drops ring events older than this (default 5 minutes; a
	// negative value keeps them until RingEvents pushes them out).
	RingAge time.Duration
	// QueueSize bounds each subscriber's queue of frames not yet written
	// (default 1024). A subscriber whose queue is full is cut off.
	QueueSize int
	// Heartbeat is the interval of the keep-alive comment (default 15 s).
	Heartbeat time.Duration
	// Retry is the reconnection delay advised to clients (default 3 s).
	Retry time.Duration
	// Batch groups deltas published within this interval of each other
	// into one round of fan-out, so a subscriber is woken, written and
	// flushed once per round rather than once per event (default 10 ms; a
	// negative value hands each Publish out at once). The first delta
	// after a quiet interval goes out at once. Measured in real time,
	// whatever the Clock.
	Batch time.Duration
	// ResumeWait bounds how long a stream resuming from a position this
	// replica has not folded yet waits for it (default 5 s).
	ResumeWait time.Duration
	// History, when set, answers what the cluster held at a past position,
	// so a stream resuming from a position the ring does not cover (older
	// than this process, or than the ring) catches up without a reset.
	History History
	// Positions maps back the compact ids of positions of many clusters
	// (projection.Store.Positions); nil with one cluster, or when ids are
	// written whole.
	Positions *projection.Book
	// Clock defaults to the system clock.
	Clock Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.RingEvents <= 0 {
		o.RingEvents = 100_000
	}
	if o.RingAge == 0 {
		o.RingAge = 5 * time.Minute
	}
	if o.QueueSize <= 0 {
		o.QueueSize = 1024
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.Retry <= 0 {
		o.Retry = 3 * time.Second
	}
	if o.Batch == 0 {
		o.Batch = 10 * time.Millisecond
	}
	if o.ResumeWait <= 0 {
		o.ResumeWait = 5 * time.Second
	}
	if o.Clock == nil {
		o.Clock = SystemClock()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Hub fans the projection's deltas out to filtered SSE streams. See the
// package documentation for its concurrency contract.
type Hub struct {
	src   Source
	opts  Options
	clock Clock
	log   *slog.Logger

	// The inbox: written by Publish, drained by Run.
	inMu  sync.Mutex
	inbox []projection.Delta
	spare []projection.Delta // Run's only
	recs  []*record          // Run's only: the batch being fanned out
	// syncAt is where Synced was called in the inbox (-1: not pending),
	// syncPos its position.
	syncAt  int
	syncPos projection.Position
	wake    chan struct{}

	mu   sync.Mutex
	ring *ring
	// pos is the position of the newest record fanned out: what a
	// heartbeat tells clients they hold.
	pos projection.Position
	// idViews are the views holding back the newest frame of the batch at
	// position idPos: it goes out with the batch's id when the batch ends
	// (the position moves, or the round ends).
	idViews []*view
	idPos   projection.Position
	// before is the hub's position before the batch at idPos: a record
	// whose cluster it marks otherwise is a change of the condition.
	before projection.Position
	// condAt is, by cluster index, the newest record that changed the
	// cluster's condition: its revision and its part of the cluster.
	condAt  []condChange
	synced  bool
	views   map[string]*view
	clients map[*subscriber]struct{} // every applications stream being served
	// catching holds the streams replaying the ring (not yet in a view),
	// so Run can cut off one that falls behind while it replays.
	catching map[*subscriber]struct{}
	trees    map[projection.AppKey]map[*treeSubscriber]struct{}
	ntrees   int
	stopped  bool
	active   sync.WaitGroup // Serve calls in progress
	touched  []*subscriber  // queued to in this round, to be woken at its end

	encodings       atomic.Uint64
	replayEncodings atomic.Uint64
	cutOff          atomic.Uint64
	slowCutOff      atomic.Uint64
	resets          atomic.Uint64
	historyResumes  atomic.Uint64
	hist            *histories
	events          atomic.Uint64
}

// condChange is where the hub last saw a cluster's condition change.
type condChange struct{ rev, rv uint64 }

// condsReplayable reports whether a client at pos, replayed from the
// ring, ends with every cluster's condition as the hub holds it: where
// it marks a cluster both hold otherwise, the ring holds the hub's change
// to its mark at or past pos's part (its rows are sent again). Called
// with h.mu held.
func (h *Hub) condsReplayable(pos projection.Position) bool {
	if pos.SameDowns(h.pos) {
		return true
	}
	for i := range pos.Len() {
		if pos.SameDown(h.pos, i) || pos.Of(i) == 0 || h.pos.Of(i) == 0 {
			continue
		}
		if i >= len(h.condAt) || h.condAt[i].rev <= h.ring.floor || h.condAt[i].rv < pos.Of(i) {
			return false
		}
	}
	return true
}

// NewHub returns a hub reading src. Its ring starts at src's current
// revision: call it before the writer starts publishing. Start Run.
func NewHub(src Source, opts Options) *Hub {
	opts = opts.withDefaults()
	return &Hub{
		src:      src,
		opts:     opts,
		clock:    opts.Clock,
		log:      opts.Logger,
		wake:     make(chan struct{}, 1),
		syncAt:   -1,
		hist:     newHistoriesOf(opts.History),
		ring:     newRing(opts.RingEvents, src.Snapshot().Revision),
		views:    map[string]*view{},
		clients:  map[*subscriber]struct{}{},
		catching: map[*subscriber]struct{}{},
		trees:    map[projection.AppKey]map[*treeSubscriber]struct{}{},
	}
}

// Publish hands the hub the deltas of one Apply, after the snapshot holding
// them was published. It never blocks and never encodes: Run does the work.
// Called by the single writer, in revision order.
func (h *Hub) Publish(deltas []projection.Delta) {
	if len(deltas) == 0 {
		return
	}
	h.inMu.Lock()
	if len(h.inbox)+len(deltas) > h.opts.RingEvents {
		// Run is a whole ring behind. Keep only the newest delta: Run sees
		// the skipped revisions and cuts every subscriber off, so none
		// misses a change silently; they resume or reset.
		clear(h.inbox)
		h.inbox = append(h.inbox[:0], deltas[len(deltas)-1])
		if h.syncAt > 0 {
			h.syncAt = 0
		}
	} else {
		h.inbox = append(h.inbox, deltas...)
	}
	h.inMu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run is the hub's goroutine: it turns published deltas into records,
// fans them out to the views, and sends the heartbeat. It returns when ctx
// ends, after every stream has been ended and its Serve call has returned.
// Call it once.
func (h *Hub) Run(ctx context.Context) {
	ticker := h.clock.NewTicker(h.opts.Heartbeat)
	defer ticker.Stop()
	batch := time.NewTimer(time.Hour)
	batch.Stop()
	defer batch.Stop()
	var lastRound time.Time
	pending := false // a round is scheduled on batch
	for {
		select {
		case <-ctx.Done():
			h.stop()
			return
		case <-h.wake:
			if pending {
				continue
			}
			if wait := h.opts.Batch - time.Since(lastRound); wait > 0 {
				batch.Reset(wait)
				pending = true
				continue
			}
			h.drain()
			lastRound = time.Now()
		case <-batch.C:
			pending = false
			h.drain()
			lastRound = time.Now()
		case <-ticker.C():
			h.heartbeat()
		}
	}
}

// Stats are the hub's counters, for metrics and tests.
type Stats struct {
	Subscribers     int    // applications streams being served
	Joined          int    // of those, the ones live in a view (past their burst and catch-up)
	Views           int    // distinct views with live subscribers
	TreeSubscribers int    // tree streams being served
	Revision        uint64 // the newest revision fanned out
	RingLen         int    // records held for resuming
	// Encodings counts frames encoded for live views: once per view that
	// sees an event, however many subscribers the view has.
	Encodings uint64
	// ReplayEncodings counts frames encoded for one subscriber: bursts
	// and catch-up from the ring.
	ReplayEncodings uint64
	CutOff          uint64 // subscribers disconnected for a full queue or skipped revisions
	SlowCutOff      uint64 // of those, the ones whose queue was full
	Resets          uint64 // streams told to reset
	// HistoryResumes counts streams caught up from the cluster's history
	// (their position older than the ring) instead of reset.
	HistoryResumes uint64
	// Position is the newest position fanned out (the heartbeat's id).
	Position projection.Position
	// Events counts the records fanned out (one per revision), so
	// Encodings/Events is the encodings per event.
	Events uint64
	// RingOldest is when the oldest record held was taken in; zero when
	// the ring is empty.
	RingOldest time.Time
}

// Stats returns the current counters.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	joined := 0
	for _, v := range h.views {
		joined += len(v.subs)
	}
	return Stats{
		Subscribers:     len(h.clients),
		Joined:          joined,
		Views:           len(h.views),
		TreeSubscribers: h.ntrees,
		Revision:        h.ring.last(),
		RingLen:         h.ring.n,
		Encodings:       h.encodings.Load(),
		ReplayEncodings: h.replayEncodings.Load(),
		CutOff:          h.cutOff.Load(),
		SlowCutOff:      h.slowCutOff.Load(),
		Resets:          h.resets.Load(),
		HistoryResumes:  h.historyResumes.Load(),
		Position:        h.pos,
		Events:          h.events.Load(),
		RingOldest:      h.ring.oldest(),
	}
}

// drain processes everything published so far.
func (h *Hub) drain() {
	for {
		h.inMu.Lock()
		batch := h.inbox
		h.inbox = h.spare[:0]
		syncAt, syncPos := h.syncAt, h.syncPos
		h.syncAt = -1
		h.inMu.Unlock()
		if len(batch) == 0 && syncAt < 0 {
			h.spare = batch
			return
		}
		now := h.clock.Now().UnixNano()
		h.mu.Lock()
		encode := h.readable()
		h.mu.Unlock()
		// Records are made (encoded) outside the lock, and each batch (the
		// records of one position) enters the ring under one hold of it,
		// so a stream catching up never sees half a batch.
		for i := 0; i < len(batch); {
			if i == syncAt {
				h.mu.Lock()
				h.markSynced(syncPos)
				h.mu.Unlock()
			}
			j := i + 1
			for j < len(batch) && j != syncAt && batch[j].Position.Equal(batch[i].Position) {
				j++
			}
			recs := h.recs[:0]
			for k := i; k < j; k++ {
				recs = append(recs, newRecord(&batch[k], now, encode))
			}
			h.mu.Lock()
			for _, rec := range recs {
				h.fanOut(rec)
			}
			h.mu.Unlock()
			clear(recs)
			h.recs = recs
			i = j
		}
		if cap(h.recs) > 4096 {
			h.recs = nil
		}
		if syncAt >= len(batch) {
			h.mu.Lock()
			h.markSynced(syncPos)
			h.mu.Unlock()
		}
		clear(batch) // let the App versions go
		if cap(batch) > 4096 {
			batch = nil // after a burst, do not keep a large array
		}
		h.spare = batch
		h.mu.Lock()
		h.queueIDs()
		if h.opts.RingAge > 0 {
			h.ring.evictBefore(now - int64(h.opts.RingAge))
		}
		h.cutFallingBehind()
		h.wakeTouched()
		h.mu.Unlock()
	}
}

// wakeTouched wakes the subscribers queued to in this round. Called with
// h.mu held.
func (h *Hub) wakeTouched() {
	for i, s := range h.touched {
		s.touched = false
		select {
		case s.wake <- struct{}{}:
		default:
		}
		h.touched[i] = nil
	}
	h.touched = h.touched[:0]
}

// queue hands a frame to a subscriber, cutting it off when its queue is
// full. Called with h.mu held.
func (h *Hub) queue(s *subscriber, frame []byte) {
	if !s.push(frame) {
		h.cutSlow(s)
		return
	}
	if !s.touched {
		s.touched = true
		h.touched = append(h.touched, s)
	}
}

// readable reports whether a record's Applications may be read: the ring
// holds every change from the first sync on, and a stream open now may
// catch up on any record fanned out from now on. A stream that opens
// later starts from a snapshot at or after every record fanned out before
// it (Publish follows the snapshot), so records fanned out while nothing
// is readable are never read. Called with h.mu held.
func (h *Hub) readable() bool { return h.synced || len(h.clients) > 0 }

// fanOut appends a record to the ring and queues its frames. Called with
// h.mu held.
func (h *Hub) fanOut(rec *record) {
	if rec.deferred() {
		if h.readable() {
			rec.encode() // a stream opened since drain looked
		} else {
			rec.newApp, rec.oldApp = nil, nil
		}
	}
	last := h.ring.last()
	if rec.rev <= last {
		return // already held
	}
	if rec.rev != last+1 {
		h.log.Error("stream: revisions were skipped; cutting every subscriber off so none misses a change",
			"want", last+1, "got", rec.rev)
		for _, v := range h.views {
			for len(v.subs) > 0 {
				h.cut(v.subs[len(v.subs)-1], errSkipped)
			}
		}
		// What came before it is lost: the ring holds every change after
		// its position, once synced.
		h.ring.reset(rec.rev-1, rec.pos, h.synced)
	}
	if !h.idPos.Covers(rec.pos) || !h.idPos.SameDowns(rec.pos) {
		h.queueIDs()
		h.idPos, h.before = rec.pos, h.pos
	}
	rec.cond = !h.before.SameDown(rec.pos, int(rec.cluster))
	if !h.pos.SameDowns(rec.pos) {
		for i := range rec.pos.Len() {
			if !h.pos.SameDown(rec.pos, i) {
				h.condAt = append(h.condAt, make([]condChange, max(0, i+1-len(h.condAt)))...)
				h.condAt[i] = condChange{rev: rec.rev, rv: rec.pos.Of(i)}
			}
		}
	}
	h.ring.push(rec)
	h.pos = rec.pos.Max(h.pos)
	h.events.Add(1)
	if rec.newJSON != nil || rec.oldJSON != nil {
		for _, v := range h.views {
			frame := v.frame(rec, &h.encodings)
			if frame == nil {
				continue
			}
			// Its newest frame goes out when the batch ends, with the
			// batch's id; an earlier one of the batch goes now, without.
			if v.held != nil {
				h.queueHeld(v, false)
			} else {
				h.idViews = append(h.idViews, v)
			}
			v.held, v.heldRev, v.heldPos, v.heldCluster, v.heldCond = frame, rec.rev, rec.pos, rec.cluster, rec.cond
		}
	}
	for t := range h.trees[rec.key] {
		t.notify()
	}
}

// heartbeat queues a keep-alive comment to every stream. It carries the
// newest revision as its id, so a client whose view saw no change for a
// while still resumes from a recent position.
func (h *Hub) heartbeat() {
	h.mu.Lock()
	defer h.mu.Unlock()
	last := h.ring.last()
	withID := append(appendID(nil, h.pos), pingFrame...)
	for _, v := range h.views {
		for i := len(v.subs) - 1; i >= 0; i-- {
			s := v.subs[i]
			f := withID
			switch {
			case s.after > last || !h.pos.Covers(s.afterPos):
				f = pingFrame // it starts after last: do not move it back
			case !h.pos.SameDowns(s.afterPos):
				// It holds a cluster's condition as another replica saw it.
				f = append(appendID(nil, h.pos.Max(s.afterPos).WithMarksOf(s.afterPos)), pingFrame...)
			}
			h.queue(s, f)
		}
	}
	h.wakeTouched()
	for _, set := range h.trees {
		for t := range set {
			t.ping()
		}
	}
}

// cutFallingBehind cuts off each stream replaying the ring whose distance
// to the ring's end has grown by more than QueueSize revisions since its
// replay began: it reads slower than the fleet changes and would replay
// forever, holding its connection, never joining a view (where a full
// queue would cut it off). One that is catching up, however far behind it
// started, is left alone. Its blocked write is made to fail like any cut
// off stream's; it resumes with Last-Event-ID. Called with h.mu held.
func (h *Hub) cutFallingBehind() {
	last := h.ring.last()
	for s := range h.catching {
		if last-min(s.replayed, last) > s.lag+uint64(h.opts.QueueSize) {
			delete(h.catching, s)
			h.log.Warn("stream subscriber cut off: it fell behind while replaying the ring; it will resume with Last-Event-ID",
				"behind", last-s.replayed, "queue", h.opts.QueueSize)
			h.slowCutOff.Add(1)
			h.cut(s, errSlowClient)
		}
	}
}

func (h *Hub) cutSlow(s *subscriber) {
	h.log.Warn("stream subscriber cut off: its queue is full; it will resume with Last-Event-ID",
		"scope", s.view.scope.Key(), "queue", h.opts.QueueSize)
	h.slowCutOff.Add(1)
	h.cut(s, errSlowClient)
}

// cut removes a subscriber from its view and ends its stream. Called with
// h.mu held.
func (h *Hub) cut(s *subscriber, cause error) {
	h.cutOff.Add(1)
	h.unjoin(s)
	s.cancel(cause)
}

func (h *Hub) unjoin(s *subscriber) {
	v := s.view
	if v == nil {
		return
	}
	last := len(v.subs) - 1
	v.subs[s.index] = v.subs[last]
	v.subs[s.index].index = s.index
	v.subs[last] = nil
	v.subs = v.subs[:last]
	if len(v.subs) == 0 {
		delete(h.views, v.key)
	}
	s.view = nil
}

// join adds a subscriber to the view of its key (spec becomes that view if
// there is none), live after revision rev and position pos. Called with
// h.mu held.
func (h *Hub) join(s *subscriber, spec *view, rev uint64, pos projection.Position) {
	v := h.views[spec.key]
	if v == nil {
		v = spec
		h.views[v.key] = v
	}
	s.index = len(v.subs)
	v.subs = append(v.subs, s)
	s.view, s.after, s.afterPos, s.joinPos = v, rev, pos, h.pos
	s.ahead, s.passed = false, false
}

// queueIDs ends a batch: each view holding back a frame of it queues the
// frame now, its id (the batch's position) first. Only the last event of a
// batch a view sees carries the id: a client cut off within a batch
// resumes before it, never after events it did not get. Called with h.mu
// held.
func (h *Hub) queueIDs() {
	if len(h.idViews) == 0 {
		return
	}
	for i, v := range h.idViews {
		h.queueHeld(v, true)
		h.idViews[i] = nil
	}
	h.idViews = h.idViews[:0]
}

// queueHeld queues a view's held frame to the subscribers it is due to,
// with the id line of its position first when withID. Called with h.mu
// held.
func (h *Hub) queueHeld(v *view, withID bool) {
	var id []byte
	if withID {
		id = appendID(nil, v.heldPos)
	}
	// Backwards: a subscriber cut off here is swapped with the last one,
	// which was already served.
	for i := len(v.subs) - 1; i >= 0; i-- {
		h.queueHeldTo(v, v.subs[i], id)
	}
	v.held = nil
}

// queueHeldTo queues a view's held frame to one of its subscribers if it
// is due to it, after the id line id when that is not nil (the batch's
// last frame). An id is never behind the position the client resumed
// from, in any cluster, and marks each cluster's condition as the client
// holds it. Called with h.mu held.
func (h *Hub) queueHeldTo(v *view, s *subscriber, id []byte) {
	c := int(v.heldCluster)
	if v.held == nil || v.heldRev <= s.after || s.saw(v.heldPos, c, v.heldCond) {
		return
	}
	if v.heldCond && !s.afterPos.SameDown(v.heldPos, c) {
		// The client holds the cluster's rows with this condition now.
		s.afterPos, s.condPos = s.afterPos.WithDown(c, v.heldPos.Down(c)), v.heldPos
	}
	if id != nil && (!s.coveredBy(v.heldPos) || !v.heldPos.SameDowns(s.afterPos)) {
		id = appendID(nil, s.afterPos.Max(v.heldPos).WithMarksOf(s.afterPos))
	}
	if id != nil && !s.push(id) {
		h.cutSlow(s)
		return
	}
	h.queue(s, v.held)
}

// Synced marks the projection as holding the whole cluster as of position
// listed (the newest resourceVersion its initial lists were taken at; 0
// for a cluster that did not answer): from now on the ring holds every
// change after the fold's position now, in the clusters listed. Before
// Synced, a stream resuming from a position is reset. Call it once the
// initial lists are folded (and their deltas published).
//
// The ring's floor (and the heartbeat's id) is the fold's position, not
// listed: a part of it is the newest resourceVersion of an object folded,
// the form every snapshot, record and client position has, the same on
// every replica that folded the same objects. A list's resourceVersion
// may be newer in a part (the API server's bookmarks, objects no row
// reads) with no change the fold holds in between: taken as the floor it
// would put every client of another replica behind it in a cluster that
// does not change, and a heartbeat's id ahead of the records after it.
func (h *Hub) Synced(listed projection.Position) {
	at := h.src.Snapshot().Position.Within(listed)
	h.inMu.Lock()
	h.syncAt, h.syncPos = len(h.inbox), at
	h.inMu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// markSynced is Synced, in Run, after the deltas published before it.
// Called with h.mu held.
func (h *Hub) markSynced(at projection.Position) {
	h.queueIDs()
	h.synced = true
	h.pos = at.Max(h.pos)
	h.ring.reset(h.ring.last(), h.pos, true)
}

// stop ends every stream and waits for their Serve calls to return.
func (h *Hub) stop() {
	h.mu.Lock()
	h.stopped = true
	for s := range h.clients {
		h.unjoin(s)
		s.cancel(ErrHubStopped)
	}
	for _, set := range h.trees {
		for t := range set {
			t.cancel(ErrHubStopped)
		}
	}
	h.mu.Unlock()
	h.active.Wait()
}
