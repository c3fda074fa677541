package stream

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"
)

// ErrDraining: the hub is draining, its process going away (503). It wraps
// ErrHubStopped, so errors.Is(err, ErrHubStopped) holds for it too.
var ErrDraining = fmt.Errorf("stream: the hub is draining: %w", ErrHubStopped)

// Why a drain ends a stream (context causes, logged): at its moment, or
// when the drain's time ran out.
var (
	errDrained  = errors.New("drained: the process is shutting down; the client resumes on another replica")
	errDrainCut = errors.New("cut off: the drain ran out of time; the client resumes on another replica")
)

// drainFrame is the last frame queued to a live applications stream the
// drain ends: a comment; with several clusters it carries the stream's id
// written whole (no compact id).
var drainFrame = []byte(": drain\n\n")

// finishPoll is how often a stream being finished is checked for having
// ended by itself (real time).
const finishPoll = 5 * time.Millisecond

// drains holds the hubs whose drain began. A process drains its hub once,
// as it ends, so the set stays small.
var drains sync.Map // *Hub → struct{}

// Draining reports whether Drain was called: the hub refuses new streams.
func (h *Hub) Draining() bool {
	_, ok := drains.Load(h)
	return ok
}

// Drain ends every applications and tree stream, spread evenly over
// `over`, so their clients resume on other replicas with Last-Event-ID
// rather than all reconnecting at once. The streams are shuffled and the
// i-th of n ends at a random moment of [i·over/n, (i+1)·over/n) from now,
// on the hub's Clock; over ≤ 0 ends them all at once. A live applications
// stream first writes every frame queued to it, then a comment, and ends;
// one still in its burst or replaying the ring ends at once (it has nothing
// queued). From the start of the drain, new streams are refused:
// ServeApplications returns ErrDraining, ServeTree ErrHubStopped; both are
// a 503.
//
// Drain returns when every stream has ended, or when ctx ends: the streams
// still open (not yet at their moment, or past it but blocked writing to a
// client that stopped reading) are then cut off at once, their blocked
// writes made to fail, and Drain returns without waiting for them; Run
// waits for them when it stops. Run must still be running: a
// drained hub is stopped by ending Run's context as usual. Waiting for the
// streams takes one goroutine, which ends with the last of them, and
// finishing each live one a goroutine, which ends with it or with Drain. A
// second call only waits.
func (h *Hub) Drain(ctx context.Context, over time.Duration) {
	cut := make(chan struct{}) // closed when Drain returns
	defer close(cut)
	h.mu.Lock()
	_, again := drains.LoadOrStore(h, struct{}{})
	h.stopped = true // enter and enterTree refuse from now on: no Add after this
	var ends []func(cause error) bool
	if !again {
		for s := range h.clients {
			ends = append(ends, func(cause error) bool { return h.drainApplications(s, cause, cut) })
		}
		for _, set := range h.trees {
			for t := range set {
				ends = append(ends, func(cause error) bool { return h.drainTree(t, cause) })
			}
		}
	}
	h.mu.Unlock()

	done := make(chan struct{})
	go func() { h.active.Wait(); close(done) }()
	n := len(ends)
	if n > 0 {
		h.log.Info("draining the streams", "streams", n, "over", over.String())
	}
	rand.Shuffle(n, func(i, j int) { ends[i], ends[j] = ends[j], ends[i] })
	timers := make([]Timer, 0, n)
	for i, end := range ends {
		if over <= 0 {
			end(errDrained)
			continue
		}
		at := time.Duration((float64(i) + rand.Float64()) / float64(n) * float64(over))
		timers = append(timers, h.clock.AfterFunc(at, func() { end(errDrained) }))
	}
	stopTimers := func() {
		for _, t := range timers {
			t.Stop()
		}
	}
	defer stopTimers()
	select {
	case <-done:
	case <-ctx.Done():
		stopTimers()
		open := 0
		for _, end := range ends {
			if end(errDrainCut) {
				open++
			}
		}
		if open > 0 {
			h.log.Warn("the drain ran out of time: the remaining streams are cut off", "streams", open, "reason", context.Cause(ctx))
		}
	}
}

// drainApplications ends an applications stream; false when it had ended
// already. At its moment (cause errDrained), a live one ends after the
// frames queued to it and the one its view holds back for the batch's id: it leaves its view, so nothing more is queued, the
// drain frame goes last (past the queue's bound), and finish ends it once
// it has written them. One not live yet, or any with another cause, is cut
// off at once.
func (h *Hub) drainApplications(s *subscriber, cause error, cut <-chan struct{}) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.clients[s]; !ok {
		return false
	}
	if s.view == nil || cause != errDrained {
		h.unjoin(s)
		s.cancel(cause)
		return true
	}
	// A frame its view holds back until the batch's id is queued now: the
	// batch was fanned out whole, and the stream leaves the view.
	if v := s.view; v.held != nil {
		h.queueHeldTo(v, s, appendID(nil, v.heldPos))
		if s.view == nil {
			return true // cut off: its queue was full
		}
	}
	frame := drainFrame
	if h.pos.Len() > 1 && s.after <= h.ring.last() && h.pos.Covers(s.afterPos) {
		// It carries the heartbeat's id written whole: the client resumes
		// on a replica that may hold none of this one's compact ids.
		frame = append([]byte("id: "), h.pos.Max(s.afterPos).WithMarksOf(s.afterPos).Append(nil)...)
		frame = append(append(frame, '\n'), drainFrame...)
	}
	h.unjoin(s)
	s.mu.Lock()
	s.pending = append(s.pending, frame)
	s.mu.Unlock()
	go h.finish(s, cut)
	return true
}

// finish ends a live stream that left its view once it has written every
// frame queued to it. The stream's loop receives a wake, writes what is
// queued, flushes, and waits for the next wake; s.wake holds one. So three
// wakes sent one after the other (each waiting for room) mean the stream
// received the first after it left its view, took the queue whole in that
// round, and was back for the second with the round flushed: the third
// goes in once it has taken the second. Then it is cancelled. finish gives
// up when the stream ended by itself (its client left) or cut closes (the
// drain is over: Drain cuts off what is left).
func (h *Hub) finish(s *subscriber, cut <-chan struct{}) {
	poll := time.NewTicker(finishPoll)
	defer poll.Stop()
	for sent := 0; sent < 3; {
		select {
		case s.wake <- struct{}{}:
			sent++
		case <-cut:
			return
		case <-poll.C:
			h.mu.Lock()
			_, serving := h.clients[s]
			h.mu.Unlock()
			if !serving {
				return
			}
		}
	}
	s.cancel(errDrained)
}

// drainTree ends a tree stream (it has no queue: it sends the latest tree
// each time); false when it had ended already.
func (h *Hub) drainTree(t *treeSubscriber, cause error) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.trees[t.key][t]; !ok {
		return false
	}
	t.cancel(cause)
	return true
}

// refusal is what enter answers once the hub stopped or began draining.
// Called with h.mu held.
func (h *Hub) refusal() error {
	if h.Draining() {
		return ErrDraining
	}
	return ErrHubStopped
}
