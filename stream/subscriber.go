package stream

import (
	"context"
	"sync"

	"github.com/hanzoai/deploy/projection"
)

// subscriber is one applications stream. view, after and touched are
// guarded by Hub.mu; the queue by its own mutex.
type subscriber struct {
	view  *view
	after uint64 // frames of revisions at or below it are not queued
	// afterPos: frames of positions at or below it are not queued (the
	// position the client resumed from).
	afterPos projection.Position
	// joinPos is the hub's position when it joined its view. A client may
	// resume from a position the fold holds but the hub has not fanned out
	// yet (it saw a change elsewhere that this replica folded after
	// another cluster's it had not seen): a record the hub fans out after
	// it joined that afterPos's part of the record's own cluster covers is
	// one it saw.
	joinPos projection.Position
	// condPos is the position of the change of a cluster's condition
	// that last changed afterPos's mark of it: the rest of that batch is
	// due too.
	condPos projection.Position
	// What afterPos is against the records fanned out to it since it
	// joined, whose positions only move forward (a part is the newest
	// resourceVersion folded of its cluster): ahead, once a record was
	// past afterPos in some cluster, so afterPos covers no later one;
	// passed, once a record covered afterPos, so every later one does.
	// Each spares a comparison of every cluster's part (500 at 500
	// clusters) per frame and stream. Cleared when it joins.
	ahead, passed bool
	index         int  // in view.subs
	touched       bool // in Hub.touched
	// While it replays the ring (in Hub.catching): the revision it has
	// written up to, and how far behind the ring's end it started.
	replayed, lag uint64
	cancel        context.CancelCauseFunc

	mu      sync.Mutex
	max     int
	pending [][]byte
	spare   [][]byte
	wake    chan struct{}
}

// saw reports whether the client holds the change of cluster c at
// position pos that the hub fans out after it joined: its position covers
// pos, or it saw the change on another replica (sawElsewhere). A change of
// the cluster's condition (cond) it holds when its position has a newer
// part of c, or the same part marked alike (not by this very batch).
func (s *subscriber) saw(pos projection.Position, c int, cond bool) bool {
	if cond {
		return !s.condPos.Equal(pos) && s.afterPos.Saw(pos, c)
	}
	return s.covers(pos) || s.sawElsewhere(pos, c)
}

// covers is afterPos.Covers(pos) for a record fanned out to s.
func (s *subscriber) covers(pos projection.Position) bool {
	if s.ahead {
		return false
	}
	if s.afterPos.Covers(pos) {
		return true
	}
	s.ahead = true
	return false
}

// coveredBy is pos.Covers(afterPos) for a record fanned out to s.
func (s *subscriber) coveredBy(pos projection.Position) bool {
	if s.passed {
		return true
	}
	s.passed = pos.Covers(s.afterPos)
	return s.passed
}

// sawElsewhere reports whether the client saw, on another replica, the
// change of cluster c at position pos that the hub fans out after it
// joined: afterPos covers pos's part of c, which the hub had not reached
// when it joined. A record at the hub's own position of c when it joined
// (a cluster's condition, which no resourceVersion moves) is not one.
func (s *subscriber) sawElsewhere(pos projection.Position, c int) bool {
	own := pos.Of(c)
	return own <= s.afterPos.Of(c) && own > s.joinPos.Of(c)
}

// push queues a frame without blocking; false when the queue is full.
// The hub wakes the subscriber at the end of the round.
func (s *subscriber) push(frame []byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.pending) >= s.max {
		return false
	}
	s.pending = append(s.pending, frame)
	return true
}

// take returns the queued frames; the slice is valid until the next take.
// The two queue arrays are kept for the next rounds, whatever they grew to
// within the queue's bound (8 KB each at the default 1,024 frames): a
// stream that takes two rounds at once, each a hundred events with their
// ids, does not grow a new array every time (100 MB of garbage in 30 s
// with 1,000 streams when only 256 frames' arrays were kept).
func (s *subscriber) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.pending
	clear(s.spare)
	s.pending, s.spare = s.spare[:0], out
	return out
}
