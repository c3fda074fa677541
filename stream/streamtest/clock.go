package streamtest

import (
	"context"
	"sync"
	"time"

	"github.com/hanzoai/deploy/stream"
)

// Clock is a fake stream.Clock: time moves only when Advance is called.
// Safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	tickers map[*ticker]struct{}
	timers  map[*timer]struct{}
	changed chan struct{} // closed and replaced when a ticker or timer is added
}

var _ stream.Clock = (*Clock)(nil)

// NewClock returns a clock standing at now.
func NewClock(now time.Time) *Clock {
	return &Clock{now: now, tickers: map[*ticker]struct{}{}, timers: map[*timer]struct{}{}, changed: make(chan struct{})}
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTicker returns a ticker that ticks when Advance passes its period.
// Like a real ticker, it drops ticks for a slow receiver.
func (c *Clock) NewTicker(d time.Duration) stream.Ticker {
	if d <= 0 {
		panic("streamtest: non-positive ticker interval")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &ticker{c: c, period: d, next: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.tickers[t] = struct{}{}
	c.signal()
	return t
}

// AfterFunc calls f once Advance passes d from now.
func (c *Clock) AfterFunc(d time.Duration, f func()) stream.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, at: c.now.Add(d), f: f}
	c.timers[t] = struct{}{}
	c.signal()
	return t
}

// Advance moves the clock forward, ticking the tickers and calling the
// timers whose time came, in this goroutine.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	now := c.now
	var due []func()
	for t := range c.timers {
		if !t.at.After(now) {
			delete(c.timers, t)
			due = append(due, t.f)
		}
	}
	for t := range c.tickers {
		if !t.next.After(now) {
			for !t.next.After(now) {
				t.next = t.next.Add(t.period)
			}
			select {
			case t.ch <- now:
			default:
			}
		}
	}
	c.mu.Unlock()
	for _, f := range due {
		f()
	}
}

// Pending reports the running tickers and pending timers.
func (c *Clock) Pending() (tickers, timers int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.tickers), len(c.timers)
}

// WaitFor waits until at least tickers tickers and timers timers are
// registered, or ctx ends (false).
func (c *Clock) WaitFor(ctx context.Context, tickers, timers int) bool {
	for {
		c.mu.Lock()
		ok := len(c.tickers) >= tickers && len(c.timers) >= timers
		ch := c.changed
		c.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		}
	}
}

func (c *Clock) signal() {
	close(c.changed)
	c.changed = make(chan struct{})
}

type ticker struct {
	c      *Clock
	period time.Duration
	next   time.Time
	ch     chan time.Time
}

func (t *ticker) C() <-chan time.Time { return t.ch }

func (t *ticker) Stop() {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	delete(t.c.tickers, t)
}

type timer struct {
	c  *Clock
	at time.Time
	f  func()
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, pending := t.c.timers[t]
	delete(t.c.timers, t)
	return pending
}
