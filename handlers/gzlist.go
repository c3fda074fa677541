package handlers

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"sync"

	"github.com/klauspost/compress/flate"
	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/projection"
)

// A gzip list is one gzip member whose DEFLATE stream is spliced from
// pieces: the list's head and the separators as stored blocks, and each run
// of rows (one namespace's, or the CD Applications) as blocks compressed
// once per version of the run and kept. Each compressed run ends in a sync
// flush (byte-aligned, not final) and refers to nothing before it, so runs
// can follow one another in any combination; the member's CRC-32 is
// combined from the pieces'. A change in one namespace recompresses that
// namespace only: the fleet-wide list at a new revision costs its
// assembly, not its compression.

// rowRun is a run of rows a list takes as a whole, and the revision at
// which it last changed.
type rowRun struct {
	name    string
	version uint64
	rows    []*projection.App
}

// visibleRuns are the runs of rows a scope's list is made of, in list
// order: every namespace then the CD Applications for a SuperAdmin, the
// tenant's part of its namespace for a member. Rows of a run the scope may
// not see are left out by sees.
func visibleRuns(snap *projection.Snapshot, sc auth.Scope) []rowRun {
	if sc.IsAll() {
		nss := snap.Namespaces()
		runs := make([]rowRun, 0, len(nss)+1)
		for i := range nss {
			runs = append(runs, rowRun{"ns:" + nss[i].Namespace, nss[i].Version, nss[i].Rows})
		}
		return append(runs, rowRun{"cd", snap.CDVersion(), snap.CDApplications()})
	}
	var runs []rowRun
	if nr := snap.TenantNamespace(auth.TenantNamespacePrefix, sc.Org()); nr != nil {
		runs = []rowRun{{"tenant:" + nr.Namespace, nr.Version, nr.Tenant}}
	}
	for _, nr := range snap.TenantElsewhere(auth.TenantNamespacePrefix, sc.Org()) {
		runs = append(runs, rowRun{"tenant:" + nr.Namespace, nr.Version, nr.Tenant})
	}
	return runs
}

// gzRun is a compressed run: raw DEFLATE blocks ending in a sync flush.
type gzRun struct {
	z     []byte
	crc   uint32 // CRC-32 of the plain bytes
	n     int64  // length of the plain bytes
	shift uint32 // x^(8n) modulo the polynomial: carries a checksum across the run
}

var flateWriters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(io.Discard, flate.BestSpeed)
	return w
}}

// compressRun compresses the rows of run that keep admits, comma-separated.
// It returns a run with n == 0 when none is admitted.
func compressRun(run rowRun, keep func(*projection.App) bool) *gzRun {
	var buf bytes.Buffer
	zw := flateWriters.Get().(*flate.Writer)
	defer flateWriters.Put(zw)
	zw.Reset(&buf)
	r := &gzRun{}
	write := func(p []byte) {
		zw.Write(p) // a bytes.Buffer does not fail
		r.crc = crc32.Update(r.crc, crc32.IEEETable, p)
		r.n += int64(len(p))
	}
	for _, a := range run.rows {
		if !keep(a) {
			continue
		}
		if r.n > 0 {
			write([]byte{','})
		}
		write(a.ApplicationJSON())
	}
	if r.n == 0 {
		return r
	}
	zw.Flush() // a sync flush: byte-aligned, not final
	r.z = buf.Bytes()
	r.shift = xPow8n(r.n) // once per run, not once per list written
	return r
}

// gzWriters buffer a gzip list's pieces (a namespace's run is a few KiB)
// into writes of projection.ListBufferSize: one write each would be a
// system call each.
var gzWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, projection.ListBufferSize) }}

// gzList is a gzip list as assembled at one revision for one view: its
// member header with the list's head, the compressed runs in order, the
// tail with the member's checksum and length, and the total size. It is
// kept in the response cache (at most one revision per view, like every
// entry), so a request at a revision already assembled only writes: no
// run is looked up, no checksum combined.
//
// It holds its runs by name, each with the version it was compressed at:
// the view's next assembly, at a new revision, takes every run whose
// version it still is and compresses the others. The runs are not entries
// of the cache of their own: a fleet of 500 clusters has thousands of
// namespaces, far more than the cache's entries, and runs evicted by
// count would be compressed again whole (135 MB) after every change.
type gzList struct {
	head, sep, tail []byte
	parts           []*gzRun // the runs with rows, in list order
	size            int64
	runs            map[string]gzRunAt
}

// gzRunAt is a compressed run and the version of the run it was made at.
type gzRunAt struct {
	version uint64
	run     *gzRun
}

// writeGzipList writes the ApplicationList of snap made of runs, each
// filtered by keep, as one gzip member with its Content-Length. Compressed
// runs are kept in the response cache under view (the scope and query) and
// the run's version; the assembly under view and rev.
func (s *Server) writeGzipList(c echo.Context, snap *projection.Snapshot, view string, runs func() []rowRun, keep func(*projection.App) bool) error {
	key, version := "gzlist|"+view, strconv.FormatUint(snap.Revision, 10)
	var l *gzList
	if cb, ok := s.cache.get(key, version); ok {
		l = cb.list
	} else {
		var prev *gzList
		if cb, ok := s.cache.latest(key); ok {
			prev = cb.list
		}
		l = assembleGzipList(snap.Position, prev, runs(), keep)
		s.cache.add(key, version, &cachedBody{list: l})
	}

	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	h.Set(echo.HeaderContentEncoding, "gzip")
	h.Set(echo.HeaderContentLength, strconv.FormatInt(l.size, 10))
	c.Response().WriteHeader(http.StatusOK)
	w := gzWriters.Get().(*bufio.Writer)
	w.Reset(c.Response())
	defer func() { w.Reset(nil); gzWriters.Put(w) }()
	if _, err := w.Write(l.head); err != nil {
		return err
	}
	for i, r := range l.parts {
		if i > 0 {
			if _, err := w.Write(l.sep); err != nil {
				return err
			}
		}
		if _, err := w.Write(r.z); err != nil {
			return err
		}
	}
	if _, err := w.Write(l.tail); err != nil {
		return err
	}
	return w.Flush()
}

// assembleGzipList takes each run from prev, the view's list at an
// earlier revision (nil: none), when it is still at the version prev
// compressed, compresses the others, and works out the member around them.
func assembleGzipList(pos projection.Position, prev *gzList, runs []rowRun, keep func(*projection.App) bool) *gzList {
	l := &gzList{parts: make([]*gzRun, 0, len(runs)), runs: make(map[string]gzRunAt, len(runs))}
	for _, run := range runs {
		at, ok := gzRunAt{}, false
		if prev != nil {
			at, ok = prev.runs[run.name]
		}
		if !ok || at.version != run.version {
			at = gzRunAt{run.version, compressRun(run, keep)}
		}
		l.runs[run.name] = at
		if at.run.n > 0 {
			l.parts = append(l.parts, at.run)
		}
	}

	var crc uint32
	var n int64
	// plain adds bytes written as stored blocks to the member's checksum.
	plain := func(p []byte) {
		crc = crc32Combine(crc, crc32.ChecksumIEEE(p), int64(len(p)))
		n += int64(len(p))
	}
	// The member header: deflate, no flags, no time, unknown OS.
	l.head = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}
	listHead := projection.AppendApplicationListHead(nil, pos)
	plain(listHead)
	l.head = appendStored(l.head, listHead)
	l.sep = appendStored(nil, []byte{','})
	l.size = int64(len(l.head))
	for i, r := range l.parts {
		if i > 0 {
			plain([]byte{','})
			l.size += int64(len(l.sep))
		}
		crc = gfMulMod(r.shift, crc) ^ r.crc // crc32Combine(crc, r.crc, r.n)
		n += r.n
		l.size += int64(len(r.z))
	}
	plain([]byte(projection.ApplicationListTail))
	l.tail = appendStored(nil, []byte(projection.ApplicationListTail))
	l.tail = append(l.tail, 1, 0, 0, 0xff, 0xff) // the final block: stored, empty
	l.tail = binary.LittleEndian.AppendUint32(l.tail, crc)
	l.tail = binary.LittleEndian.AppendUint32(l.tail, uint32(n)) // ISIZE is the length mod 2^32
	l.size += int64(len(l.tail))
	return l
}

// appendStored appends p (at most 65535 bytes) as one non-final stored
// DEFLATE block, which starts on a byte boundary.
func appendStored(dst, p []byte) []byte {
	l := uint16(len(p))
	dst = append(dst, 0)
	dst = binary.LittleEndian.AppendUint16(dst, l)
	dst = binary.LittleEndian.AppendUint16(dst, ^l)
	return append(dst, p...)
}

// crc32Combine returns the CRC-32 (IEEE) of A followed by B, given the
// CRC-32 of A, that of B and B's length: A's checksum is carried across
// len2 bytes of zeros by multiplying with x^(8·len2) modulo the
// polynomial, in the reflected bit order the checksum uses.
func crc32Combine(crc1, crc2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crc1
	}
	return gfMulMod(xPow8n(len2), crc1) ^ crc2
}

// gfMulMod multiplies a and b, polynomials over GF(2) in reflected order (bit
// 31 is x^0), modulo the IEEE polynomial.
func gfMulMod(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crc32.IEEE
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow2k[k] is x^(2^k) modulo the polynomial, reflected.
var xPow2k = func() (t [64]uint32) {
	p := uint32(1) << 30 // x^1
	for k := range t {
		t[k] = p
		p = gfMulMod(p, p)
	}
	return t
}()

// xPow8n returns x^(8n) modulo the polynomial: n bytes of shift.
func xPow8n(n int64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; k, n = k+1, n>>1 {
		if n&1 != 0 {
			p = gfMulMod(xPow2k[k], p)
		}
	}
	return p
}
