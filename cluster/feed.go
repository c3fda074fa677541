package cluster

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hanzoai/deploy/projection"
)

// Feed carries changes from the informer callbacks to the one goroutine that
// writes the projection.Store. Push never blocks (callbacks must not); Run
// drains the queue in arrival order, in batches of at most MaxBatch, so a
// burst costs one snapshot per batch rather than one per change.
type Feed struct {
	// MaxBatch bounds how many changes one Apply folds.
	MaxBatch int

	mu    sync.Mutex
	queue []projection.Change
	wake  chan struct{}

	// pushed and applied count changes ever queued and ever folded (and
	// published): the projection holds everything pushed up to a moment
	// once applied reaches what pushed was then.
	pushed, applied atomic.Uint64
}

// NewFeed returns an empty feed.
func NewFeed() *Feed {
	return &Feed{MaxBatch: 4096, wake: make(chan struct{}, 1)}
}

// Push queues one change. Safe for concurrent use; never blocks.
func (f *Feed) Push(c projection.Change) {
	f.mu.Lock()
	f.queue = append(f.queue, c)
	f.pushed.Add(1)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// Pushed is the number of changes ever queued.
func (f *Feed) Pushed() uint64 { return f.pushed.Load() }

// Applied is the number of changes ever folded into the store, their deltas
// published.
func (f *Feed) Applied() uint64 { return f.applied.Load() }

// Len is the number of changes waiting.
func (f *Feed) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// take removes up to MaxBatch changes from the head of the queue.
func (f *Feed) take(buf []projection.Change) []projection.Change {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(len(f.queue), max(f.MaxBatch, 1))
	buf = append(buf[:0], f.queue[:n]...)
	clear(f.queue[:n])
	f.queue = f.queue[n:]
	if len(f.queue) == 0 {
		f.queue = nil // let the backing array go after a burst
	}
	return buf
}

// Run is the single writer: it applies queued changes to store and hands
// each batch's deltas to publish, after the snapshot holding them is
// published. It returns when ctx ends.
func (f *Feed) Run(ctx context.Context, store *projection.Store, publish func([]projection.Delta), log *slog.Logger) {
	var buf []projection.Change
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		for {
			buf = f.take(buf)
			if len(buf) == 0 {
				break
			}
			deltas, err := store.Apply(buf...)
			if err != nil {
				log.Debug("changes refused by the projection", "err", err)
			}
			clear(buf)
			if len(deltas) > 0 && publish != nil {
				publish(deltas)
			}
			f.applied.Add(uint64(len(buf)))
			if ctx.Err() != nil {
				return
			}
		}
	}
}
