package stream

import "time"

// Clock is the hub's source of time: heartbeats, token expiry and the age of
// the resume ring. Tests inject a fake one (streamtest.Clock) instead of
// sleeping.
type Clock interface {
	Now() time.Time
	// NewTicker returns a ticker that ticks every d.
	NewTicker(d time.Duration) Ticker
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Ticker is a running ticker of a Clock.
type Ticker interface {
	C() <-chan time.Time
	Stop()
}

// Timer is a pending AfterFunc of a Clock.
type Timer interface {
	// Stop prevents the call if it has not happened yet; it reports whether
	// it did.
	Stop() bool
}

// SystemClock is the real clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTicker(d time.Duration) Ticker { return systemTicker{time.NewTicker(d)} }

func (systemClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

type systemTicker struct{ t *time.Ticker }

func (t systemTicker) C() <-chan time.Time { return t.t.C }
func (t systemTicker) Stop()               { t.t.Stop() }
