package auth

import (
	"net"
	"net/http"
	"strings"
)

// LoopbackHostOnly answers 421 Misdirected Request to a request whose Host
// is not a loopback name or address (localhost, 127.0.0.0/8, [::1], with
// or without a port), and passes the others to next. A server bound to
// loopback still answers a page of another site that a DNS rebinding
// points at 127.0.0.1; such a request names that site as its Host. The
// demo's servers, which accept pushes and demo sign-ins, sit behind it.
func LoopbackHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if !IsLoopbackHost(host) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_, _ = w.Write([]byte("the demo answers only loopback hosts (127.0.0.1, localhost, [::1]); Host " + quoteHost(r.Host) + " refused: open it at http://127.0.0.1:<port>/\n"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// quoteHost is a Host header for a message: printable, bounded.
func quoteHost(h string) string {
	if len(h) > 100 {
		h = h[:100] + "…"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return '?'
		}
		return r
	}, h)
}
