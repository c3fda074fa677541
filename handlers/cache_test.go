package handlers

import (
	"fmt"
	"strconv"
	"testing"
)

// TestCacheKeepsOneVersionPerKey: bodies rendered at successive revisions
// replace each other, so a stream of changes leaves one body per key and
// the byte count equals what is held.
func TestCacheKeepsOneVersionPerKey(t *testing.T) {
	rc := newResponseCache(256)
	body := make([]byte, 1<<20)
	for rev := range 100 {
		for _, key := range []string{"list|root|", "list|acme|"} {
			v := strconv.Itoa(rev)
			if _, ok := rc.get(key, v); ok {
				t.Fatalf("%s@%s held before it was rendered", key, v)
			}
			cb := &cachedBody{body: body}
			rc.add(key, v, cb)
			if rev%3 == 0 {
				cb.gzip(rc)
			}
			if got, ok := rc.get(key, v); !ok || got != cb {
				t.Fatalf("%s@%s: not held after add", key, v)
			}
			if _, ok := rc.get(key, strconv.Itoa(rev-1)); ok {
				t.Fatalf("%s: the previous version is still served", key)
			}
		}
	}
	if n := rc.lru.Len(); n != 2 {
		t.Fatalf("%d entries after 100 revisions of 2 keys, want 2", n)
	}
	var held int64
	for _, k := range rc.lru.Keys() {
		cb, _ := rc.lru.Peek(k)
		held += cb.size()
	}
	if got := rc.bytes.Load(); got != held {
		t.Fatalf("byte count %d, bodies held %d", got, held)
	}
}

// TestCacheBoundedByBytes: distinct keys past the byte bound evict the
// oldest, and the count follows.
func TestCacheBoundedByBytes(t *testing.T) {
	rc := newResponseCache(1 << 20)
	rc.maxBytes = 10 << 20
	for i := range 50 {
		rc.add(fmt.Sprintf("k%d", i), "1", &cachedBody{body: make([]byte, 1<<20)})
	}
	if got := rc.bytes.Load(); got > rc.maxBytes {
		t.Fatalf("%d bytes held, bound %d", got, rc.maxBytes)
	}
	if n := rc.lru.Len(); n != 10 {
		t.Fatalf("%d entries of 1 MiB under a 10 MiB bound", n)
	}
}

// TestCacheHoldsAFullFleetList: the full list of a 10,000-App fleet (25 MB
// plain) is held under the default bound, so it is rendered once a revision.
func TestCacheHoldsAFullFleetList(t *testing.T) {
	rc := newResponseCache(256)
	rc.add("list|root|", "7", &cachedBody{body: make([]byte, 30<<20)})
	if _, ok := rc.get("list|root|", "7"); !ok {
		t.Fatal("a 30 MiB list was not held")
	}
}
