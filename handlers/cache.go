package handlers

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/klauspost/compress/gzip"
	"github.com/labstack/echo/v4"
)

// responseCache keeps rendered bodies per (scope, route, query, revision),
// rendered once however many clients ask, and the compressed runs lists
// are spliced from (gzlist.go). It is bounded by entry count and by total
// bytes.
type responseCache struct {
	lru      *lru.Cache[string, *cachedBody]
	mu       sync.Mutex
	bytes    int64
	maxBytes int64
}

// cachedBody is one rendered body and, made on first demand, its gzip form;
// or a compressed run of a list (see gzlist.go), then gzipped is its blocks.
type cachedBody struct {
	body     []byte
	gzipOnce sync.Once
	gzipped  []byte
	run      *gzRun
}

func newResponseCache(entries int) *responseCache {
	rc := &responseCache{maxBytes: 256 << 20}
	rc.lru, _ = lru.NewWithEvict(entries, func(_ string, v *cachedBody) {
		rc.mu.Lock()
		rc.bytes -= v.size()
		rc.mu.Unlock()
	})
	return rc
}

func (rc *responseCache) get(key string) (*cachedBody, bool) { return rc.lru.Get(key) }

func (rc *responseCache) add(key string, b *cachedBody) {
	if b.size() > rc.maxBytes/4 {
		return // one body may not crowd out the rest
	}
	rc.lru.Add(key, b)
	rc.mu.Lock()
	rc.bytes += b.size()
	over := rc.bytes > rc.maxBytes
	rc.mu.Unlock()
	for over {
		if _, _, ok := rc.lru.RemoveOldest(); !ok {
			return
		}
		rc.mu.Lock()
		over = rc.bytes > rc.maxBytes
		rc.mu.Unlock()
	}
}

// size is what the entry holds, in bytes. The gzip form is counted when it
// is made (under the cache's lock), so size must be read under it too.
func (b *cachedBody) size() int64 { return int64(len(b.body) + len(b.gzipped)) }

func (b *cachedBody) gzip(rc *responseCache) []byte {
	b.gzipOnce.Do(func() {
		var buf bytes.Buffer
		buf.Grow(len(b.body) / 4)
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
		_, _ = zw.Write(b.body)
		_ = zw.Close()
		b.gzipped = buf.Bytes()
		rc.mu.Lock()
		rc.bytes += int64(len(b.gzipped))
		rc.mu.Unlock()
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
	key = key + "@" + version
	cb, ok := s.cache.get(key)
	if !ok {
		body, err := render()
		if err != nil {
			return err
		}
		cb = &cachedBody{body: body}
		s.cache.add(key, cb)
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
