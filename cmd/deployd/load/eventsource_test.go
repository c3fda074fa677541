package load

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// appIndex numbers the fleet's Apps ("namespace/name" → index), shared by
// every client: a view is a slice of tag hashes by index, so ten thousand
// clients of a ten-thousand-App fleet hold 8 bytes per App each. With
// several clusters, another cluster's namespaces are qualified
// ("<namespace>.<cluster>", as deployd names them) and each App knows its
// cluster.
type appIndex struct {
	idx  map[string]int32
	keys []string
	// clusters are the clusters' names, the first's first, as deployd's
	// positions name them; nil with one cluster (positions are decimals).
	clusters []string
	// cluster is each App's cluster, by index in clusters (0: the first).
	cluster []uint8
}

func newAppIndex(keys []string) *appIndex { return newClustersAppIndex(nil, keys) }

// newClustersAppIndex indexes the Apps of the clusters names (nil or one
// name: one cluster).
func newClustersAppIndex(names, keys []string) *appIndex {
	if len(names) > esParts {
		panic(fmt.Sprintf("%d clusters: a client position holds %d parts", len(names), esParts))
	}
	if len(names) <= 1 {
		names = nil
	}
	ix := &appIndex{idx: make(map[string]int32, len(keys)), keys: keys, clusters: names, cluster: make([]uint8, len(keys))}
	for i, k := range keys {
		ix.idx[k] = int32(i)
		ns, _, _ := strings.Cut(k, "/")
		if _, name, ok := strings.Cut(ns, "."); ok {
			ix.cluster[i] = uint8(max(slices.Index(names, name), 0))
		}
	}
	return ix
}

// esParts bounds the clusters a client's position has parts for.
const esParts = 4

// esPos is a stream position as a client judges it: the resourceVersion
// of each cluster, by its index in appIndex.clusters (one cluster: part
// 0). deployd writes it as a decimal with one cluster and as
// "<cluster>=<rv>,…" with several (projection.Position). Positions are
// ordered part by part: two clusters' resourceVersions are never
// compared. The zero esPos is no position.
type esPos [esParts]uint64

// isZero reports whether p is no position.
func (p esPos) isZero() bool { return p == esPos{} }

// covers reports whether p is at or past q in every cluster.
func (p esPos) covers(q esPos) bool {
	for i := range p {
		if q[i] > p[i] {
			return false
		}
	}
	return true
}

// max is the newer of p and q in every part.
func (p esPos) max(q esPos) esPos {
	for i := range p {
		p[i] = max(p[i], q[i])
	}
	return p
}

// format writes p as deployd does for the clusters names.
func (p esPos) format(names []string) string {
	if len(names) <= 1 {
		return strconv.FormatUint(p[0], 10)
	}
	var b []byte
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(append(append(b, n...), '='), p[i], 10)
	}
	return string(b)
}

// parseESPos reads an id as a client of the clusters names holds it: a
// decimal is the first cluster's part; "<cluster>=<rv>,…" gives parts by
// name, one it leaves out at 0 (a part's mark of its cluster not
// answering, "~<since>", is deployd's to read back). false: not a position of these clusters
// (a name deployd does not read, or not a number); the zero esPos then.
func parseESPos(b []byte, names []string) (esPos, bool) {
	var p esPos
	if bytes.IndexByte(b, '=') < 0 {
		rv, err := strconv.ParseUint(string(b), 10, 64)
		p[0] = rv
		return p, err == nil
	}
	if len(names) <= 1 {
		return esPos{}, false
	}
	for len(b) > 0 {
		part := b
		if i := bytes.IndexByte(b, ','); i >= 0 {
			part, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		name, num, ok := bytes.Cut(part, []byte("="))
		if !ok {
			return esPos{}, false
		}
		num, _, _ = bytes.Cut(num, []byte("~"))
		i := slices.Index(names, string(name))
		rv, err := strconv.ParseUint(string(num), 10, 64)
		if i < 0 || err != nil {
			return esPos{}, false
		}
		p[i] = rv
	}
	return p, true
}

// tagSeed hashes tags the same way in every view and in the truth.
var tagSeed = maphash.MakeSeed()

// tagHash is a tag's fingerprint in a view; 0 means "not in the view".
func tagHash(tag []byte) uint64 { return maphash.Bytes(tagSeed, tag) | 1 }

// esConn is one connection of a client: what it sent and what it was told.
type esConn struct {
	At     time.Time
	Sent   esPos // the Last-Event-ID sent, zero when none
	Status int   // the HTTP status; 0 when no response came (refused, deployd down)
	Reset  bool  // "event: reset" came before any other event
	First  esPos // the id of the first event with data after the position (zero when none)
	Events int
	Ended  time.Time
}

// esClient reads the applications stream the way a browser's EventSource
// does: it reconnects by itself after the advised retry: (with jitter, so a
// storm spreads), sends Last-Event-ID, and applies ADDED/MODIFIED/DELETED to
// its view of the fleet (App → spec.image.tag, read from
// status.sync.revision). "event: reset" clears the view before the burst
// that follows; a connection without an id clears it too (a burst replaces
// what it held). Parsing is a few bytes.Index calls per frame: thousands of
// clients share one process.
//
// One liberty with the EventSource algorithm: an event is applied when its
// data line arrives, not at the blank line that ends it (no copy of the
// line is needed). A frame cut before its blank line is then applied
// without moving the position, and is replayed on resume: the same value
// set twice, which a view tolerates.
type esClient struct {
	url, token string
	hc         *http.Client
	apps       *appIndex

	slow      atomic.Int64 // when > 0, read at most this many bytes a second
	bytesRead atomic.Int64 // bytes read from streams
	measure   atomic.Bool  // record the latency of stamped changes
	// measureFrom: while measuring, only changes sent at or after it
	// (Unix nanoseconds) are recorded.
	measureFrom atomic.Int64

	mu         sync.Mutex
	view       []uint64          // by appIndex; 0 absent
	extra      map[string]uint64 // rows that are no App of the index (CD Applications, sites)
	lastID     esPos             // the client's position: the last id it was given
	lastText   string            // that id as written, sent back as Last-Event-ID
	retry      time.Duration
	conns      []esConn
	lat        []time.Duration
	regress    int // ids that went backwards within a connection (in any cluster's part)
	badIDs     int // ids that are no position of the index's clusters
	resets     int
	cancelConn context.CancelFunc
	dropDelay  time.Duration // set by drop: the wait before the next connection
	dropped    bool

	done chan struct{}
	key  []byte // scratch: "namespace/name"

	// track, when set, judges every event against the client's position
	// (duplicates, ids going back, versions held): streams_replicas_test.go.
	track *esTrack
}

func newESClient(url, token string, hc *http.Client, apps *appIndex) *esClient {
	return &esClient{url: url, token: token, hc: hc, apps: apps, view: make([]uint64, len(apps.keys)),
		extra: map[string]uint64{}, retry: 3 * time.Second, done: make(chan struct{})}
}

// start runs the client until ctx ends; done is closed when it has.
func (c *esClient) start(ctx context.Context) {
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			c.connect(ctx)
			select {
			case <-ctx.Done():
				return
			case <-time.After(c.nextDelay()):
			}
		}
	}()
}

// nextDelay is the advised retry times a factor in [0.5, 1.5), or the
// delay drop asked for.
func (c *esClient) nextDelay() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dropped {
		c.dropped = false
		return c.dropDelay
	}
	return time.Duration(float64(c.retry) * (0.5 + rand.Float64()))
}

// drop closes the current connection as a network failure would; the
// client connects again after delay.
func (c *esClient) drop(delay time.Duration) {
	c.mu.Lock()
	c.dropped, c.dropDelay = true, delay
	cancel := c.cancelConn
	c.mu.Unlock()
	if cancel != nil {
		cancel()
	}
}

// goSlow moves the client to a slow link: it reconnects at once (with its
// position) over hc and reads at most rate bytes a second from then on. A
// fresh connection, because a socket that once ran at full speed keeps the
// large send buffer its kernel grew for it.
func (c *esClient) goSlow(rate int64, hc *http.Client) {
	c.mu.Lock()
	c.hc = hc
	c.mu.Unlock()
	c.slow.Store(rate)
	c.drop(0)
}

func (c *esClient) connect(ctx context.Context) {
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c.mu.Lock()
	c.cancelConn = cancel
	at, sent, sentText := time.Now(), c.lastID, c.lastText
	if sent.isZero() {
		clear(c.view)
		clear(c.extra)
	}
	c.mu.Unlock()
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, c.url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer "+c.token)
	if !sent.isZero() {
		req.Header.Set("Last-Event-ID", sentText)
	}
	c.mu.Lock()
	hc := c.hc
	c.mu.Unlock()
	resp, err := hc.Do(req)
	status := 0
	if err == nil {
		status = resp.StatusCode
	}
	c.mu.Lock()
	c.conns = append(c.conns, esConn{At: at, Sent: sent, Status: status})
	cur := len(c.conns) - 1
	if c.track != nil {
		c.track.connected(sent)
	}
	c.mu.Unlock()
	if err == nil {
		if status == http.StatusOK {
			c.read(resp.Body, cur)
		} else {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		}
		resp.Body.Close()
	}
	c.mu.Lock()
	c.cancelConn = nil
	c.conns[cur].Ended = time.Now()
	c.mu.Unlock()
}

var (
	prefixData  = []byte("data: ")
	prefixID    = []byte("id: ")
	prefixEvent = []byte("event: ")
	prefixRetry = []byte("retry: ")
	fieldType   = []byte(`{"result":{"type":"`)
	fieldMeta   = []byte(`"metadata":{"name":"`)
	fieldNS     = []byte(`","namespace":"`)
	fieldSync   = []byte(`"sync":{"status":"`)
	fieldRev    = []byte(`","revision":"`)
)

// resumeAt sets the client's position to the id text (a list's
// metadata.resourceVersion, say), as if a stream had given it.
func (c *esClient) resumeAt(text string) error {
	p, ok := parseESPos([]byte(text), c.apps.clusters)
	if !ok {
		return fmt.Errorf("%q is no position of the clusters %v", text, c.apps.clusters)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastID, c.lastText = p, text
	return nil
}

// read parses one stream until it ends.
func (c *esClient) read(body io.Reader, cur int) {
	br := bufio.NewReaderSize(&throttle{r: body, rate: &c.slow, n: &c.bytesRead}, 8<<10)
	var (
		long           []byte // a line longer than the buffer
		id             esPos
		idText         []byte // id as written
		hasID, isReset bool
		connMax        esPos
	)
	for {
		line, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			long = append(long, line...)
			continue
		}
		if err != nil {
			return
		}
		if long != nil {
			line = append(long, line...)
			long = long[:0:0]
		}
		line = line[:len(line)-1]
		switch {
		case len(line) == 0: // dispatch
			if hasID {
				c.mu.Lock()
				if c.track != nil {
					c.track.position(c.lastID, id)
				}
				c.lastID = id
				if c.lastText != string(idText) {
					c.lastText = string(idText)
				}
				if !id.covers(connMax) {
					c.regress++
				}
				c.mu.Unlock()
				connMax = connMax.max(id)
			}
			hasID, isReset = false, false
		case line[0] == ':':
		case bytes.HasPrefix(line, prefixID):
			idText = append(idText[:0], line[len(prefixID):]...)
			var ok bool
			if id, ok = parseESPos(idText, c.apps.clusters); !ok {
				c.mu.Lock()
				c.badIDs++
				c.mu.Unlock()
			}
			hasID = true
		case bytes.HasPrefix(line, prefixEvent):
			isReset = string(line[len(prefixEvent):]) == "reset"
		case bytes.HasPrefix(line, prefixRetry):
			if ms, err := strconv.Atoi(string(line[len(prefixRetry):])); err == nil && ms > 0 {
				c.mu.Lock()
				c.retry = time.Duration(ms) * time.Millisecond
				c.mu.Unlock()
			}
		case bytes.HasPrefix(line, prefixData):
			if isReset {
				c.mu.Lock()
				clear(c.view)
				clear(c.extra)
				c.resets++
				if c.track != nil {
					c.track.reset()
				}
				cn := &c.conns[cur]
				cn.Reset = cn.Reset || cn.Events == 0
				cn.Events++
				c.mu.Unlock()
				continue
			}
			c.apply(line[len(prefixData):], cur, id, hasID)
		}
	}
}

// apply sets or removes one App of the view from an event's data.
func (c *esClient) apply(data []byte, cur int, id esPos, hasID bool) {
	typ := valueAfter(data, fieldType)
	i := bytes.Index(data, fieldMeta)
	if typ == nil || i < 0 {
		return
	}
	rest := data[i+len(fieldMeta):]
	name := rest[:max(bytes.IndexByte(rest, '"'), 0)]
	ns := valueAfter(rest[len(name):], fieldNS)
	var tag []byte
	if j := bytes.Index(data, fieldSync); j >= 0 {
		s := data[j+len(fieldSync):]
		if k := bytes.IndexByte(s, '"'); k >= 0 && bytes.HasPrefix(s[k:], fieldRev) {
			tag = valueAfter(s[k:], fieldRev)
		}
	}
	c.key = append(append(append(c.key[:0], ns...), '/'), name...)
	deleted := string(typ) == "DELETED"
	h := tagHash(tag)
	c.mu.Lock()
	defer c.mu.Unlock()
	cn := &c.conns[cur]
	cn.Events++
	if cn.First.isZero() && hasID && !cn.Sent.covers(id) {
		cn.First = id
	}
	ix, ok := c.apps.idx[string(c.key)]
	if ok && c.track != nil {
		c.track.event(ix, data, deleted)
	}
	switch {
	case !ok && deleted:
		delete(c.extra, string(c.key))
	case !ok:
		c.extra[string(c.key)] = h
	case deleted:
		c.view[ix] = 0
	default:
		old := c.view[ix]
		c.view[ix] = h
		if old != h && c.measure.Load() {
			if t, ok := stampIn(tag); ok && t.UnixNano() >= c.measureFrom.Load() {
				c.lat = append(c.lat, time.Since(t))
			}
		}
	}
}

// valueAfter is the JSON string value that follows prefix in b (names,
// namespaces and tags need no unescaping).
func valueAfter(b, prefix []byte) []byte {
	i := bytes.Index(b, prefix)
	if i < 0 {
		return nil
	}
	v := b[i+len(prefix):]
	if j := bytes.IndexByte(v, '"'); j >= 0 {
		return v[:j]
	}
	return nil
}

// throttle reads at most *rate bytes a second while it is set, a quarter
// of that every 250 ms.
type throttle struct {
	r    io.Reader
	rate *atomic.Int64
	n    *atomic.Int64
	next time.Time
}

func (t *throttle) Read(p []byte) (int, error) {
	rate := t.rate.Load()
	if rate <= 0 {
		n, err := t.r.Read(p)
		t.n.Add(int64(n))
		return n, err
	}
	if grain := int(max(rate/4, 1)); len(p) > grain {
		p = p[:grain]
	}
	if d := time.Until(t.next); d > 0 {
		time.Sleep(d)
	}
	t.next = time.Now().Add(250 * time.Millisecond)
	n, err := t.r.Read(p)
	t.n.Add(int64(n))
	return n, err
}

// truth is the API server's own answer: each indexed App's tag hash, and
// the other rows a view may hold (CD Applications and Middlewares).
type truth struct {
	tags   []uint64
	others map[string]bool
}

// diff compares the client's view with the truth: Apps missing, Apps with
// another tag, and rows that are neither an App nor another row kind.
func (c *esClient) diff(tr *truth) (missing, wrong, extra int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, want := range tr.tags {
		switch got := c.view[i]; {
		case got == 0 && want != 0:
			missing++
		case got != want:
			wrong++
		}
	}
	for k := range c.extra {
		if !tr.others[k] {
			extra++
		}
	}
	return missing, wrong, extra
}

// connsSince returns a copy of the connections made at or after t.
func (c *esClient) connsSince(t time.Time) []esConn {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []esConn
	for _, cn := range c.conns {
		if !cn.At.Before(t) {
			out = append(out, cn)
		}
	}
	return out
}

// synced reports whether the client is connected and holds a position
// (its burst is done).
func (c *esClient) synced() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.conns)
	return !c.lastID.isZero() && n > 0 && c.conns[n-1].Status == http.StatusOK && c.conns[n-1].Ended.IsZero()
}

// takeLatencies returns and forgets the latencies recorded so far.
func (c *esClient) takeLatencies() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.lat
	c.lat = nil
	return l
}

// newStreamHTTPClient is a transport clients share. slowLink gives each
// socket what a slow link has, unlike loopback: a small receive window
// (4 KiB) and small segments (536 bytes). The server's kernel sizes its
// send buffer from the segment size and the congestion window: with
// loopback's 64 KiB segments it would hold megabytes a 1 KB/s reader never
// drains, in front of deployd's own queue.
func newStreamHTTPClient(slowLink bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	if slowLink {
		d.Control = func(_, _ string, rc syscall.RawConn) error {
			var serr error
			err := rc.Control(func(fd uintptr) {
				serr = errors.Join(syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4<<10),
					syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_MAXSEG, 536))
			})
			return errors.Join(err, serr)
		}
	}
	return &http.Client{Transport: &http.Transport{
		DialContext: d.DialContext, MaxIdleConnsPerHost: 64, DisableCompression: true,
		ResponseHeaderTimeout: 30 * time.Second,
	}}
}
