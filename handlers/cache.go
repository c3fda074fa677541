package handlers

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"
)

// responseCache keeps rendered bodies per (scope, route, query) at one
// version (the revision they were rendered at), rendered once however many
// clients ask, and the compressed runs lists are spliced from (gzlist.go).
// A key holds only its latest version: rendering a newer one replaces the
// older body, which no request can ask for again (answers are at the
// current revision), so a stream of changes does not fill the cache with
// bodies of past revisions. It is bounded by entry count and by total bytes
// (128 MiB; one body at most half of it: the full list of a 10,000-App
// fleet is 25 MB plain, 2 MB gzipped).
type responseCache struct {
	lru      *lru.Cache[string, *cachedBody]
	mu       sync.Mutex // orders a replacement's peek and add
	bytes    atomic.Int64
	maxBytes int64
}

// cachedBody is one rendered body and, made on first demand, its gzip form;
// or an assembled gzip list (see gzlist.go).
type cachedBody struct {
	version  string // what the body was rendered at
	body     []byte
	gzipOnce sync.Once
	gzipped  []byte
	gzLen    atomic.Int64 // len(gzipped) once it is made, readable by anyone
	list     *gzList      // an assembled gzip list, its compressed runs with it
	tag      string       // a list's entity tag (listTag)
}

func newResponseCache(entries int) *responseCache {
	rc := &responseCache{maxBytes: 128 << 20}
	rc.lru, _ = lru.NewWithEvict(entries, func(_ string, v *cachedBody) { rc.bytes.Add(-v.size()) })
	return rc
}

// get returns the body of key at version, if that is the one held.
func (rc *responseCache) get(key, version string) (*cachedBody, bool) {
	b, ok := rc.lru.Get(key)
	if !ok || b.version != version {
		return nil, false
	}
	return b, true
}

// latest returns the body key holds, at whatever version.
func (rc *responseCache) latest(key string) (*cachedBody, bool) {
	return rc.lru.Peek(key)
}

// add holds b as key's body at version, in place of any other version.
func (rc *responseCache) add(key, version string, b *cachedBody) {
	b.version = version
	if b.size() > rc.maxBytes/2 {
		return // one body may not crowd out the rest
	}
	// Replacing a key's value calls no eviction: its old size leaves here.
	// The lock covers the peek and the add, so two renders of one key
	// cannot both subtract the same old body.
	rc.mu.Lock()
	if old, ok := rc.lru.Peek(key); ok {
		rc.bytes.Add(-old.size())
	}
	rc.bytes.Add(b.size())
	rc.lru.Add(key, b)
	rc.mu.Unlock()
	for rc.bytes.Load() > rc.maxBytes {
		if _, _, ok := rc.lru.RemoveOldest(); !ok {
			return
		}
	}
}

// size is what the entry holds, in bytes, its gzip form counted once made.
func (b *cachedBody) size() int64 {
	n := int64(len(b.body)) + b.gzLen.Load()
	if l := b.list; l != nil {
		// The runs' blocks (l.size is the member's length, which holds
		// them all), and the index of them by name.
		n += l.size + int64(64*len(l.runs))
	}
	return n
}

func (b *cachedBody) gzip(rc *responseCache) []byte {
	b.gzipOnce.Do(func() {
		var buf bytes.Buffer
		buf.Grow(len(b.body) / 4)
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		_, _ = zw.Write(b.body)
		_ = zw.Close()
		b.gzipped = buf.Bytes()
		b.gzLen.Store(int64(len(b.gzipped)))
		rc.bytes.Add(int64(len(b.gzipped)))
	})
	return b.gzipped
}

// respondCached answers a JSON body rendered at most once per key and
// revision: ETag is the revision, If-None-Match answers 304, and the body is
// gzipped (once) when the client accepts it.
func (s *Server) respondCached(c echo.Context, rev uint64, key string, render func() ([]byte, error)) error {
	return s.respondCachedAt(c, strconv.FormatUint(rev, 10), key, render)
}

// respondCachedAt is respondCached for an answer whose version is more
// than the snapshot's revision (the drift board's: the revision and the
// release source's generation).
func (s *Server) respondCachedAt(c echo.Context, version, key string, render func() ([]byte, error)) error {
	if notModifiedAt(c, version) {
		return c.NoContent(http.StatusNotModified)
	}
	cb, ok := s.cache.get(key, version)
	if !ok {
		body, err := render()
		if err != nil {
			return err
		}
		cb = &cachedBody{body: body}
		s.cache.add(key, version, cb)
	}
	return s.writeBody(c, cb)
}

// notModified sets the caching headers of an answer at revision rev (the
// ETag) and reports whether the client already holds it (If-None-Match).
func notModified(c echo.Context, rev uint64) bool {
	return notModifiedAt(c, strconv.FormatUint(rev, 10))
}

func notModifiedAt(c echo.Context, version string) bool {
	etag := `"` + version + `"`
	h := c.Response().Header()
	h.Set(echo.HeaderCacheControl, "no-store")
	h.Set("ETag", etag)
	h.Add(echo.HeaderVary, echo.HeaderAcceptEncoding)
	inm := c.Request().Header.Get("If-None-Match")
	return inm != "" && etagMatches(inm, etag)
}

// writeBody sends a rendered JSON body, gzipped when accepted and worth it.
func (s *Server) writeBody(c echo.Context, cb *cachedBody) error {
	if len(cb.body) >= 1024 && acceptsGzip(c.Request()) {
		c.Response().Header().Set(echo.HeaderContentEncoding, "gzip")
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, cb.gzip(s.cache))
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, cb.body)
}

func etagMatches(header, etag string) bool {
	for _, part := range strings.Split(header, ",") {
		part = strings.TrimSpace(part)
		if part == etag || part == "W/"+etag || part == "*" {
			return true
		}
	}
	return false
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get(echo.HeaderAcceptEncoding), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.TrimSpace(q) != "q=0" {
			return true
		}
	}
	return false
}
