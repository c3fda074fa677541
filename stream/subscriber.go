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
	index   int  // in view.subs
	touched bool // in Hub.touched
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
	return s.afterPos.Covers(pos) || s.sawElsewhere(pos, c)
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

// keptQueue is the largest queue array a subscriber keeps for its next
// round (6 KB): a round of a hundred events, each with its id, fits, so a
// busy stream does not grow a new one each round.
const keptQueue = 256

// take returns the queued frames; the slice is valid until the next take.
func (s *subscriber) take() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.pending
	clear(s.spare)
	if cap(s.spare) > keptQueue {
		s.spare = nil // after a spike, give the large array back
	}
	s.pending, s.spare = s.spare[:0], out
	return out
}
