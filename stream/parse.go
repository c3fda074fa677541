package stream

import (
	"fmt"
	"strconv"

	"github.com/hanzoai/deploy/projection"
)

// ParseLastEventID reads the Last-Event-ID header a reconnecting client
// sends: the id of the last event it received, a position of the clusters
// named by clusters (projection.ParsePosition). "" (and "0") mean none and
// return the zero Position. The error says what is wrong, for a 400.
func ParseLastEventID(s string, clusters []string) (projection.Position, error) {
	p, err := projection.ParsePosition(s, clusters)
	if err != nil {
		return p, fmt.Errorf("Last-Event-ID %s is not an event id of this stream: %w; reconnect without it to start over", quoteShort(s), err)
	}
	return p, nil
}

// ParseResourceVersion reads the resourceVersion query parameter: the
// metadata.resourceVersion of a GET /v1/deploy/applications list, from
// which the stream continues without a gap. "" (and "0") mean none.
func ParseResourceVersion(s string, clusters []string) (projection.Position, error) {
	p, err := projection.ParsePosition(s, clusters)
	if err != nil {
		return p, fmt.Errorf("resourceVersion %s is not a position: %w; pass the metadata.resourceVersion of GET /v1/deploy/applications, or leave it out", quoteShort(s), err)
	}
	return p, nil
}

// quoteShort quotes a client-given value for a message, cut to 64 bytes.
func quoteShort(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return strconv.Quote(s)
}
