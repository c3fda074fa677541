package cluster

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanzoai/deploy/projection"
)

// Feed carries changes from the informer callbacks to the one goroutine that
// writes the projection.Store. Push never blocks (callbacks must not); Run
// drains the queue in arrival order, in batches of at most MaxBatch, so a
// burst costs one snapshot per batch rather than one per change.
type Feed struct {
	// MaxBatch bounds how many changes one Apply folds.
	MaxBatch int
	// OnBatch, when set before Run, is called by the writer after each
	// batch is folded and published (for metrics). It must not block.
	OnBatch func(Batch)

	mu    sync.Mutex
	queue []projection.Change
	// since is when the change at the head of the queue was queued, as
	// near as the feed knows: the time the queue last went from empty to
	// not empty, or the last take that left changes behind.
	since time.Time
	wake  chan struct{}

	// byKind counts changes ever queued, by kind.
	byKind [32]atomic.Uint64

	// pushed and applied count changes ever queued and ever folded (and
	// published): the projection holds everything pushed up to a moment
	// once applied reaches what pushed was then.
	pushed, applied atomic.Uint64
	// taken counts changes ever taken by the writer; the writer takes
	// everything up to whole (a count of changes pushed) in one batch,
	// however large (PushAll).
	taken, whole uint64
}

// NewFeed returns an empty feed.
func NewFeed() *Feed {
	return &Feed{MaxBatch: 4096, wake: make(chan struct{}, 1)}
}

// Push queues one change. Safe for concurrent use; never blocks.
func (f *Feed) Push(c projection.Change) {
	if c.Object != nil && int(c.Object.Kind) < len(f.byKind) {
		f.byKind[c.Object.Kind].Add(1)
	}
	f.mu.Lock()
	if len(f.queue) == 0 {
		f.since = time.Now()
	}
	f.queue = append(f.queue, c)
	f.pushed.Add(1)
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// PushAll queues changes that are folded together, in one Apply whatever
// MaxBatch: their deltas share one position, so no stream sees some of
// them without the others (a cluster's initial lists, which name a row
// complete only together). Safe for concurrent use; never blocks.
func (f *Feed) PushAll(cs []projection.Change) {
	for _, c := range cs {
		if c.Object != nil && int(c.Object.Kind) < len(f.byKind) {
			f.byKind[c.Object.Kind].Add(1)
		}
	}
	f.mu.Lock()
	if len(f.queue) == 0 {
		f.since = time.Now()
	}
	f.queue = append(f.queue, cs...)
	f.whole = f.pushed.Add(uint64(len(cs)))
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

// Changes returns the number of changes ever queued of kind k.
func (f *Feed) Changes(k projection.Kind) uint64 {
	if int(k) >= len(f.byKind) {
		return 0
	}
	return f.byKind[k].Load()
}

// Batch describes one batch the writer folded.
type Batch struct {
	// Size is the number of changes folded.
	Size int
	// Fold is how long Apply and publish took.
	Fold time.Duration
	// Wait is how long the batch's oldest change waited between the
	// informer's notification and the end of its fold (the queue's time
	// is kept per burst, so it is exact for a change that found the queue
	// empty and a lower bound otherwise).
	Wait time.Duration
}

// Len is the number of changes waiting.
func (f *Feed) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// take removes up to MaxBatch changes from the head of the queue (more
// when they end a PushAll), and says when the first of them was queued.
func (f *Feed) take(buf []projection.Change) ([]projection.Change, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	since := f.since
	n := min(len(f.queue), max(f.MaxBatch, 1))
	if f.whole > f.taken+uint64(n) {
		n = min(len(f.queue), int(f.whole-f.taken))
	}
	f.taken += uint64(n)
	buf = append(buf[:0], f.queue[:n]...)
	clear(f.queue[:n])
	f.queue = f.queue[n:]
	if len(f.queue) == 0 {
		f.queue = nil // let the backing array go after a burst
	} else {
		f.since = time.Now()
	}
	return buf, since
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
			var since time.Time
			buf, since = f.take(buf)
			if len(buf) == 0 {
				break
			}
			start := time.Now()
			deltas, err := store.Apply(buf...)
			if err != nil {
				log.Debug("changes refused by the projection", "err", err)
			}
			clear(buf)
			if len(deltas) > 0 && publish != nil {
				publish(deltas)
			}
			f.applied.Add(uint64(len(buf)))
			if f.OnBatch != nil {
				end := time.Now()
				f.OnBatch(Batch{Size: len(buf), Fold: end.Sub(start), Wait: end.Sub(since)})
			}
			if ctx.Err() != nil {
				return
			}
		}
	}
}
