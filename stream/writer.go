package stream

import (
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Errors a Serve method returns before it writes anything; the handler
// turns them into an HTTP status.
var (
	// ErrStreamingUnsupported: the ResponseWriter cannot flush (500).
	ErrStreamingUnsupported = errors.New("stream: the response writer cannot flush")
	// ErrHubStopped: the hub is shutting down (503).
	ErrHubStopped = errors.New("stream: the hub is stopped")
	// ErrExpired: the caller's credential has already expired (401).
	ErrExpired = errors.New("stream: the credential has expired")
	// ErrNotFound: the application does not exist or is not visible to
	// the caller; the two are answered alike (404).
	ErrNotFound = errors.New("stream: application not found")
)

// Reasons a stream ends, as context causes (logged, never sent).
var (
	errSlowClient  = errors.New("queue full: the client does not read fast enough")
	errSkipped     = errors.New("the hub missed revisions")
	errLeftScope   = errors.New("the application left the caller's scope")
	errStreamDone  = errors.New("the stream returned")
	errWriteFailed = errors.New("writing to the client failed")
)

// Frames every stream shares.
var (
	pingFrame  = []byte(": ping\n\n")
	resetFrame = []byte("event: reset\ndata: {}\n\n")
)

// eventWriter writes SSE frames to one client. Only the Serve goroutine
// writes; abort may come from any goroutine.
//
// What is written until the next flush is gathered in a buffer of up to
// writeChunk bytes (from a pool, held only until that flush) and handed to
// the ResponseWriter whole: a round of 100 frames of 3 KB to a client is
// two or three writes to its socket, not one or two a frame, and it leaves
// in one HTTP chunk. A frame as large as the buffer goes as it is.
type eventWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	err error // the first write or flush error; later writes are skipped
	buf *[]byte

	mu       sync.Mutex
	finished bool
}

func newEventWriter(w http.ResponseWriter) (*eventWriter, error) {
	if !canFlush(w) {
		return nil, ErrStreamingUnsupported
	}
	return &eventWriter{w: w, rc: http.NewResponseController(w)}, nil
}

// canFlush looks through wrappers (Unwrap) for a Flusher, as
// http.ResponseController does.
func canFlush(w http.ResponseWriter) bool {
	for {
		switch t := w.(type) {
		case http.Flusher, interface{ FlushError() error }:
			return true
		case interface{ Unwrap() http.ResponseWriter }:
			w = t.Unwrap()
		default:
			return false
		}
	}
}

// start sends the headers, the retry interval and a first comment, and
// flushes them before any event.
func (e *eventWriter) start(retry time.Duration) error {
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
	b := make([]byte, 0, 32)
	b = append(b, "retry: "...)
	b = strconv.AppendInt(b, retry.Milliseconds(), 10)
	b = append(b, "\n: ping\n\n"...)
	e.write(b)
	return e.flush()
}

// writeChunk is the most an eventWriter gathers before it writes.
const writeChunk = 64 << 10

var chunks = sync.Pool{New: func() any {
	b := make([]byte, 0, writeChunk)
	return &b
}}

func (e *eventWriter) write(b []byte) {
	if e.err != nil {
		return
	}
	if e.buf != nil && len(*e.buf)+len(b) > writeChunk {
		e.spill()
	}
	if len(b) >= writeChunk {
		if e.err == nil {
			_, e.err = e.w.Write(b)
		}
		return
	}
	if e.buf == nil {
		e.buf = chunks.Get().(*[]byte)
	}
	*e.buf = append(*e.buf, b...)
}

// spill writes what is gathered.
func (e *eventWriter) spill() {
	if e.buf == nil {
		return
	}
	if len(*e.buf) > 0 && e.err == nil {
		_, e.err = e.w.Write(*e.buf)
	}
	*e.buf = (*e.buf)[:0]
}

// flush writes what is gathered, gives the buffer back, and flushes.
func (e *eventWriter) flush() error {
	e.spill()
	if e.buf != nil {
		chunks.Put(e.buf)
		e.buf = nil
	}
	if e.err == nil {
		e.err = e.rc.Flush()
	}
	return e.err
}

// abort makes a write blocked on a client that stopped reading fail now,
// unless the stream already finished (the connection may then serve
// another request).
func (e *eventWriter) abort() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.finished {
		_ = e.rc.SetWriteDeadline(time.Unix(1, 0)) // any instant in the past
	}
}

func (e *eventWriter) finish() {
	e.mu.Lock()
	e.finished = true
	e.mu.Unlock()
}
