package stream

import (
	"context"
	"net/http"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// catchUpChunk is how many ring records a catching-up stream reads per
// hold of the hub's lock.
const catchUpChunk = 256

// ServeApplications streams application events to one client until it
// goes away, its credential expires (req.Expiry), the hub stops, or it is
// cut off for not reading. It returns an error only before writing anything
// (ErrStreamingUnsupported, ErrHubStopped, ErrExpired), for the handler to
// answer; once the stream started it returns nil and logs why it ended.
//
// Where the stream starts:
//   - LastEventID M (else ResourceVersion M): the visible changes after M,
//     replayed from the ring, then live. When M is from before this process
//     (≤ Snapshot().Base), newer than any revision here, or older than the
//     ring, an "event: reset" comes first and then the full ADDED burst.
//   - neither: one ADDED per visible application of the current snapshot
//     (the last one carries the snapshot's revision as its id), then the
//     changes after it.
func (h *Hub) ServeApplications(w http.ResponseWriter, r *http.Request, req Request) error {
	out, err := newEventWriter(w)
	if err != nil {
		return err
	}
	wait, err := h.expiryWait(req.Expiry)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(errStreamDone)
	s := &subscriber{cancel: cancel, max: h.opts.QueueSize, wake: make(chan struct{}, 1)}
	if err := h.enter(s); err != nil {
		return err
	}
	defer h.leave(s)
	defer out.finish()
	defer h.bindLifetime(ctx, r, out, wait, cancel)()
	if out.start(h.opts.Retry) != nil {
		return nil
	}
	spec := newView(req.Scope, req.Filter)
	h.stream(ctx, out, s, spec, req)
	cause := context.Cause(ctx)
	if cause == nil {
		cause = out.err
	}
	h.log.Debug("applications stream ended", "scope", req.Scope.Key(), "reason", cause)
	return nil
}

// stream runs the three phases: burst, resume position or catch-up from
// the cluster's history; catch-up from the ring; then live frames from the
// subscriber's queue.
func (h *Hub) stream(ctx context.Context, out *eventWriter, s *subscriber, spec *view, req Request) {
	forgotten := false // a compact id no replica holds: the client is reset
	if req.LastEventRef != "" {
		if p, ok := h.opts.Positions.Resolve(ctx, req.LastEventRef); ok {
			req.LastEventID = p
		} else {
			forgotten = true
			h.log.Info("stream resumed from a compact id no replica holds: it is reset", "id", req.LastEventRef)
		}
	}
	pos := req.LastEventID
	if pos.IsZero() && !forgotten {
		pos = req.ResourceVersion
	}
	var rev uint64                // the revision replayed from
	var after projection.Position // the position the client holds
	burst, reset := pos.IsZero() && !forgotten, forgotten
	if !burst && !reset {
		var ok bool
		if rev, ok = h.resumable(ctx, pos); ok {
			after = pos
		} else if ctx.Err() != nil {
			return
		} else if rev, after, ok = h.fromHistory(ctx, out, spec, pos); !ok {
			if ctx.Err() != nil || out.err != nil {
				return
			}
			reset = true
		}
	}
	for {
		if reset {
			h.resets.Add(1)
			out.write(resetFrame)
		}
		if burst || reset {
			var ok bool
			if rev, ok = h.burst(ctx, out, spec); !ok {
				return
			}
			burst, reset, after = false, false, projection.Position{}
		}
		joined, tooOld := h.catchUp(ctx, out, s, spec, rev, after)
		if tooOld {
			reset = true
			continue
		}
		if !joined {
			return
		}
		break
	}
	// One channel to wait on (cheaper than a select per round): the end
	// of the stream wakes it too.
	stopWake := context.AfterFunc(ctx, func() {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	})
	defer stopWake()
	for {
		<-s.wake
		if ctx.Err() != nil {
			return
		}
		for _, f := range s.take() {
			out.write(f)
		}
		if out.flush() != nil {
			s.cancel(errWriteFailed)
			return
		}
	}
}

// resumable waits (up to ResumeWait) until this replica has synced (its
// initial lists are folded) and folded position pos, and returns the
// revision after which the ring holds the changes since pos. false: the
// ring does not cover pos (it is older than the ring, or this replica has
// not synced or not reached it in time). A cluster this replica holds
// nothing of (it has not answered since the replica started) is not
// waited for: the client keeps what it holds of it, its ids keep its part,
// and once the cluster answers its changes after that part come live.
func (h *Hub) resumable(ctx context.Context, pos projection.Position) (uint64, bool) {
	// Wall time, not the injected clock: this waits for the fold, which no
	// test clock drives.
	deadline := time.Now().Add(h.opts.ResumeWait)
	for {
		h.mu.Lock()
		synced := h.synced
		h.mu.Unlock()
		if snap := h.src.Snapshot().Position; synced && snap.Covers(pos.Within(snap)) {
			break
		}
		if !time.Now().Before(deadline) || !sleepCtx(ctx, resumePoll) {
			return 0, false
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.ring.floorKnown || !pos.Covers(h.ring.floorPos) || !h.condsReplayable(pos) {
		return 0, false
	}
	rev := h.ring.locate(pos)
	// A cluster the client marks otherwise: its rows go again from the
	// hub's last change of its condition, which pos may cover.
	for i := range pos.Len() {
		if i < len(h.condAt) && !pos.SameDown(h.pos, i) && h.condAt[i].rev > h.ring.floor {
			rev = min(rev, h.condAt[i].rev-1)
		}
	}
	return rev, true
}

// resumePoll is how often a resuming stream looks whether the fold reached
// its position.
const resumePoll = 10 * time.Millisecond

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// burst writes one ADDED per application the view sees in the current
// snapshot and returns its revision. The last event (or, when there is
// none, an empty frame) carries the snapshot's position as its id: a
// client cut off mid-burst has no new id and starts over.
func (h *Hub) burst(ctx context.Context, out *eventWriter, spec *view) (uint64, bool) {
	snap := h.src.Snapshot()
	rows := spec.rows(snap)
	for i, a := range rows {
		if i%64 == 0 && (ctx.Err() != nil || out.err != nil) {
			return 0, false
		}
		h.replayEncodings.Add(1)
		if i == len(rows)-1 {
			out.write(appendID(nil, snap.Position))
		}
		spec.writeAdded(out, a.ApplicationJSON())
	}
	if len(rows) == 0 && !snap.Position.IsZero() {
		out.write(append(appendID(nil, snap.Position), '\n'))
	}
	return snap.Revision, out.flush() == nil
}

// catchUp replays the ring after revision rev (frames of positions after
// pos), chunk by chunk, until it reaches the hub's newest revision; then
// it joins the live view under the same lock, so no revision is missed or
// repeated. tooOld: the ring no longer holds the revisions right after
// rev.
func (h *Hub) catchUp(ctx context.Context, out *eventWriter, s *subscriber, spec *view, rev uint64, pos projection.Position) (joined, tooOld bool) {
	var chunk []*record
	h.mu.Lock()
	s.replayed, s.lag = rev, h.ring.last()-min(rev, h.ring.last())
	h.catching[s] = struct{}{}
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		delete(h.catching, s)
		h.mu.Unlock()
	}()
	// The newest frame of a position is held back to carry its id. An id
	// is never behind pos in any cluster: this replica may have folded a
	// change of one cluster the client saw elsewhere after another
	// cluster's it had not seen, and a client given the record's own
	// position would, after a cut, be sent the first change again. The
	// client holds everything pos covers and every record up to this one.
	var held []byte
	heldPos := pos
	// seenPast is the position of the last record skipped as seen that
	// pos does not cover: a change of one cluster the client saw on
	// another replica, which folded the clusters' changes in another
	// order. The client's last id moves past it, so that a later resume
	// does not send it again. Never set with one cluster.
	var seenPast projection.Position
	seenMoved := false
	// pos's marks are the clusters' conditions as the client holds them
	// (ids carry them): a change of a condition it is sent sets its
	// cluster's, and the rest of that batch (condPos) is due too.
	var condPos projection.Position
	flushHeld := func(withID bool) {
		if held != nil {
			if withID {
				out.write(appendID(nil, pos.Max(heldPos).WithMarksOf(pos)))
			}
			out.write(held)
			held = nil
		}
	}
	for {
		if ctx.Err() != nil {
			return false, false
		}
		h.mu.Lock()
		s.replayed = rev
		if rev >= h.ring.last() {
			// The ring ends with a whole batch (the hub adds a batch's
			// records under one hold of its lock): the held frame is the
			// last of its position. It is queued, not written, under the
			// lock, ahead of anything live.
			delete(h.catching, s)
			id := pos.Max(heldPos)
			if seenMoved {
				id = id.Max(seenPast)
			}
			id = id.WithMarksOf(pos)
			if held != nil || seenMoved {
				s.push(appendID(nil, id))
				if held != nil {
					s.push(held)
				} else {
					s.push(newline) // an id alone: the client's position moves
				}
				select {
				case s.wake <- struct{}{}:
				default:
				}
			}
			h.join(s, spec, rev, pos)
			s.condPos = condPos
			h.mu.Unlock()
			return true, false
		}
		if rev < h.ring.floor {
			h.mu.Unlock()
			return false, true
		}
		chunk = h.ring.after(chunk[:0], rev, catchUpChunk)
		h.mu.Unlock()
		for _, rec := range chunk {
			if rec.newJSON == nil && rec.oldJSON == nil {
				continue
			}
			if held != nil && (!heldPos.Covers(rec.pos) || !heldPos.SameDowns(rec.pos)) {
				flushHeld(true) // a new batch
			}
			if (!rec.cond || !condPos.Equal(rec.pos)) && rec.seenAt(pos) {
				if !pos.Covers(rec.pos) {
					seenPast, seenMoved = rec.pos, true
				}
				continue
			}
			if c := int(rec.cluster); rec.cond && !pos.SameDown(rec.pos, c) {
				pos, condPos = pos.WithDown(c, rec.pos.Down(c)), rec.pos
			}
			if f := spec.frame(rec, &h.replayEncodings); f != nil {
				flushHeld(false)
				held, heldPos = f, rec.pos
			}
		}
		rev = chunk[len(chunk)-1].rev
		clear(chunk)
		if out.flush() != nil {
			return false, false
		}
	}
}

// newline ends a frame holding an id alone.
var newline = []byte("\n")

// expiryWait is how long until the credential expires (0: never).
func (h *Hub) expiryWait(expiry time.Time) (time.Duration, error) {
	if expiry.IsZero() {
		return 0, nil
	}
	d := expiry.Sub(h.clock.Now())
	if d <= 0 {
		return 0, ErrExpired
	}
	return d, nil
}

// enter counts a stream in; refused once the hub stopped.
func (h *Hub) enter(s *subscriber) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return h.refusal()
	}
	h.clients[s] = struct{}{}
	h.active.Add(1)
	return nil
}

// leave forgets a stream: out of its view (the view goes with its last
// subscriber) and out of the hub.
func (h *Hub) leave(s *subscriber) {
	h.mu.Lock()
	h.unjoin(s)
	delete(h.clients, s)
	delete(h.catching, s)
	h.mu.Unlock()
	h.active.Done()
}

// bindLifetime ties a stream's end to the hub's decisions: a stream the hub
// ends (cut off, expired, stopped) may be blocked writing to a client that
// stopped reading, so that write is made to fail; and the credential's
// expiry (wait from now, 0 for none) ends it. It returns the cleanup.
func (h *Hub) bindLifetime(ctx context.Context, r *http.Request, out *eventWriter, wait time.Duration, cancel context.CancelCauseFunc) func() {
	stopAbort := context.AfterFunc(ctx, func() {
		if r.Context().Err() == nil {
			out.abort()
		}
	})
	if wait <= 0 {
		return func() { stopAbort() }
	}
	timer := h.clock.AfterFunc(wait, func() { cancel(ErrExpired) })
	return func() { timer.Stop(); stopAbort() }
}
