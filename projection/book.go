package projection

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
)

// CompactOver is the length past which a position's id is written
// compact: a written position longer than this many bytes (about 30
// clusters) is sent as "@" and a digest of it, which the Book maps back
// (docs/decisions/0014-compact-ids-of-many-clusters.md).
const CompactOver = 512

// idLen is the length of a compact id: "@" and 22 characters of base64url
// (128 bits of SHA-256).
const idLen = 1 + 22

// Book keeps the positions this replica gave compact ids, by id, so that
// a client resuming from one (Last-Event-ID, a list's entity tag) resumes
// from exactly that position. An id is the digest of the written
// position, so every replica names one position alike, and a position a
// peer answers for an id is checked against it before it is used. Safe
// for concurrent use.
type Book struct {
	names []string
	kept  *lru.Cache[string, Position]
	// Lookup asks the other replicas for the written position of an id
	// this one does not hold; nil: none is asked.
	Lookup func(ctx context.Context, id string) (string, error)
}

// NewBook returns a book of the clusters of names (the first's first)
// that keeps the last size positions it named.
func NewBook(names []string, size int) *Book {
	kept, _ := lru.New[string, Position](max(size, 16))
	return &Book{names: names, kept: kept}
}

// Names are the clusters the book's positions are of.
func (b *Book) Names() []string { return b.names }

// Len is how many positions the book holds.
func (b *Book) Len() int { return b.kept.Len() }

// IsID reports whether s is written as a compact id ("@…").
func IsID(s string) bool { return strings.HasPrefix(s, "@") }

// CheckID says what is wrong with s as a compact id a client sent, nil
// when it is one.
func CheckID(s string) error {
	if len(s) != idLen {
		return fmt.Errorf("a compact id is @ and 22 characters, not %d", len(s)-1)
	}
	if _, err := base64.RawURLEncoding.DecodeString(s[1:]); err != nil {
		return errors.New("a compact id is @ and 22 characters of base64url")
	}
	return nil
}

// IDOf is the compact id of a written position.
func IDOf(written string) string { return idOf([]byte(written)) }

// idOf is the compact id of a written position.
func idOf(written []byte) string {
	sum := sha256.Sum256(written)
	return "@" + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// keep records p under id.
func (b *Book) keep(id string, p Position) {
	if _, ok := b.kept.Peek(id); !ok {
		b.kept.Add(id, p)
	}
}

// Written is the full written form of the position an id this replica
// gave names, for a peer asking; "" when it holds none.
func (b *Book) Written(id string) string {
	if b == nil {
		return ""
	}
	p, ok := b.kept.Get(id)
	if !ok {
		return ""
	}
	return p.String()
}

// Held is the position of id when this replica holds it.
func (b *Book) Held(id string) (Position, bool) {
	if b == nil {
		return Position{}, false
	}
	return b.kept.Get(id)
}

// Resolve is the position of id: kept here, else as a peer (Lookup)
// wrote it, when its digest is id's. ok is false when no replica holds
// it (they all started after it was given, or it is not an id of this
// fleet).
func (b *Book) Resolve(ctx context.Context, id string) (p Position, ok bool) {
	if b == nil || CheckID(id) != nil {
		return Position{}, false
	}
	if p, ok = b.kept.Get(id); ok {
		return p, true
	}
	if b.Lookup == nil {
		return Position{}, false
	}
	written, err := b.Lookup(ctx, id)
	if err != nil || written == "" || idOf([]byte(written)) != id {
		return Position{}, false
	}
	if p, err = ParsePosition(written, b.names); err != nil {
		return Position{}, false
	}
	p = p.InBook(b)
	b.keep(id, p)
	return p, true
}

// InBook is p with its compact ids kept in b once given.
func (p Position) InBook(b *Book) Position {
	if p.v == nil || p.v.names == nil || p.v.book == b {
		return p
	}
	v := p.clone(nil)
	v.book = b
	return Position{v}
}

// AppendID appends the position's id to dst: its written form, or, when
// that is longer than CompactOver and p belongs to a Book, its compact
// id, which the Book then maps back.
func (p Position) AppendID(dst []byte) []byte {
	if p.v == nil || p.v.book == nil || p.v.names == nil {
		return p.Append(dst)
	}
	if id := p.v.id.Load(); id != nil {
		if *id == "" {
			return p.Append(dst)
		}
		p.v.book.keep(*id, p)
		return append(dst, *id...)
	}
	written := p.Append(make([]byte, 0, 16*len(p.v.rv)))
	id := ""
	if len(written) > CompactOver {
		id = idOf(written)
		p.v.book.keep(id, p)
	}
	p.v.id.Store(&id)
	if id == "" {
		return append(dst, written...)
	}
	return append(dst, id...)
}

// ID is the position's id (AppendID).
func (p Position) ID() string { return string(p.AppendID(nil)) }
