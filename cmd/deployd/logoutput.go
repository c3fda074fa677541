package main

import (
	"io"
	"sync"
	"time"
)

// Access lines are held and written in batches, as nginx's buffered
// access_log does: a write at most every accessFlushEvery, or once
// accessHeldMax bytes are held, instead of a write system call for every
// request (at thousands of small answers a second, the one write was a
// tenth of a request's CPU). Every other line is written at once, after
// the access lines before it.
const (
	accessFlushEvery = 100 * time.Millisecond
	accessHeldMax    = 64 << 10
)

// logOutput is the process's log output, shared by two loggers: its Write
// (every log line but the access lines) writes through; Batched's writes
// (the access lines) are held. Order is kept: a line written through
// first writes what is held. What is held when the process dies without
// Flush (SIGKILL, a crash) is lost: at most accessFlushEvery of access
// lines.
type logOutput struct {
	mu    sync.Mutex
	out   io.Writer
	held  []byte
	every time.Duration
	max   int
	timer *time.Timer // armed while something is held
}

func newLogOutput(out io.Writer, every time.Duration, max int) *logOutput {
	o := &logOutput{out: out, every: every, max: max}
	o.timer = time.AfterFunc(time.Hour, o.Flush)
	o.timer.Stop()
	return o
}

// Write writes what is held, then p.
func (o *logOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.flushLocked(); err != nil {
		return 0, err
	}
	return o.out.Write(p)
}

// Flush writes what is held.
func (o *logOutput) Flush() {
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.flushLocked()
}

func (o *logOutput) flushLocked() error {
	if len(o.held) == 0 {
		return nil
	}
	o.timer.Stop()
	_, err := o.out.Write(o.held)
	o.held = o.held[:0]
	return err
}

// Batched is the writer whose lines are held.
func (o *logOutput) Batched() io.Writer { return batchedOutput{o} }

type batchedOutput struct{ o *logOutput }

func (b batchedOutput) Write(p []byte) (int, error) {
	o := b.o
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.held) == 0 {
		o.timer.Reset(o.every)
	}
	o.held = append(o.held, p...)
	if len(o.held) >= o.max {
		if err := o.flushLocked(); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}
