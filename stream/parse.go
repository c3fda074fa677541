package stream

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// maxIDLen bounds an id or a resourceVersion: a uint64 has at most 20
// decimal digits.
const maxIDLen = 20

// ParseLastEventID reads the Last-Event-ID header a reconnecting client
// sends: the id of the last event it received, a decimal revision. "" (and
// "0") mean none and return 0. The error says what is wrong, for a 400.
func ParseLastEventID(s string) (uint64, error) {
	rev, err := parseRevision(s)
	if err != nil {
		return 0, fmt.Errorf("Last-Event-ID %s is not an event id of this stream: %w; reconnect without it to start over", quoteShort(s), err)
	}
	return rev, nil
}

// ParseResourceVersion reads the resourceVersion query parameter: the
// metadata.resourceVersion of a GET /v1/deploy/applications list, from
// which the stream continues without a gap. "" (and "0") mean none.
func ParseResourceVersion(s string) (uint64, error) {
	rev, err := parseRevision(s)
	if err != nil {
		return 0, fmt.Errorf("resourceVersion %s is not a revision: %w; pass the metadata.resourceVersion of GET /v1/deploy/applications, or leave it out", quoteShort(s), err)
	}
	return rev, nil
}

func parseRevision(s string) (uint64, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, nil
	}
	if len(s) > maxIDLen {
		return 0, errors.New("it has more than 20 digits")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errors.New("want a decimal number such as 1761234567000123")
		}
	}
	rev, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errors.New("it does not fit in 64 bits")
	}
	return rev, nil
}

// quoteShort quotes a client-given value for a message, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strconv.Quote(s)
}
