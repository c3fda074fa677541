package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
)

// sealVersion is the first byte of every sealed value, so the format can
// change without old values being misread.
const sealVersion = 1

// errUnsealed is returned for any value that was not sealed by this key for
// this purpose: wrong key, wrong purpose, truncated, altered, or not base64.
var errUnsealed = errors.New("cookie not sealed by this server")

// sealer encrypts and authenticates cookie values with AES-256-GCM. Each
// purpose ("flow", "session") gets its own key derived with HKDF-SHA256 from
// the configured key material, and the purpose is also bound as additional
// data, so a value sealed for one purpose never opens as another.
//
// Wire format: base64url(no padding) of version(1) || nonce(12) || ciphertext||tag(16).
type sealer struct {
	purpose string
	aead    cipher.AEAD
}

func newSealer(master []byte, purpose string) (*sealer, error) {
	key, err := hkdf.Key(sha256.New, master, nil, "deployd cookie "+purpose+" v1", 32)
	if err != nil {
		return nil, fmt.Errorf("derive %s key: %w", purpose, err)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("%s cipher: %w", purpose, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("%s aead: %w", purpose, err)
	}
	return &sealer{purpose: purpose, aead: aead}, nil
}

// seal encrypts plaintext; the result is safe as a cookie value.
func (s *sealer) seal(plaintext []byte) string {
	ns := s.aead.NonceSize()
	buf := make([]byte, 1+ns, 1+ns+len(plaintext)+s.aead.Overhead())
	buf[0] = sealVersion
	if _, err := rand.Read(buf[1 : 1+ns]); err != nil {
		panic("crypto/rand failed: " + err.Error()) // crypto/rand never fails on supported platforms
	}
	out := s.aead.Seal(buf, buf[1:1+ns], plaintext, s.ad())
	return base64.RawURLEncoding.EncodeToString(out)
}

// open reverses seal. Any failure is errUnsealed, never a panic.
func (s *sealer) open(value string) ([]byte, error) {
	ns := s.aead.NonceSize()
	if len(value) > base64.RawURLEncoding.EncodedLen(maxSealedBytes) {
		return nil, errUnsealed
	}
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(raw) < 1+ns+s.aead.Overhead() || raw[0] != sealVersion {
		return nil, errUnsealed
	}
	pt, err := s.aead.Open(nil, raw[1:1+ns], raw[1+ns:], s.ad())
	if err != nil {
		return nil, errUnsealed
	}
	return pt, nil
}

func (s *sealer) ad() []byte { return []byte("deployd/" + s.purpose) }

// maxSealedBytes bounds what open will even try to decode (the largest
// session fits in maxSessionChunks cookies).
const maxSealedBytes = 64 << 10
