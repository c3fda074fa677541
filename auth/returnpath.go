package auth

import (
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxReturnPath bounds a return path; longer ones become "/".
const maxReturnPath = 2048

// SafeReturnPath returns p when it is a same-site absolute path (with its
// query and fragment kept as given), and "/" otherwise. Refused: empty,
// anything not starting with a single "/" ("//evil", "/\evil",
// "https://evil", "javascript:…"), any backslash, control or format
// character, white space or invalid UTF-8, and anything longer than 2 KiB. The result is
// always safe to put in a Location header of this site.
func SafeReturnPath(p string) string {
	if p == "" || len(p) > maxReturnPath || p[0] != '/' {
		return "/"
	}
	if len(p) > 1 && (p[1] == '/' || p[1] == '\\') {
		return "/"
	}
	if !utf8.ValidString(p) || strings.ContainsRune(p, '\\') {
		return "/"
	}
	for _, r := range p {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) || r == utf8.RuneError {
			return "/"
		}
	}
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return "/"
	}
	return p
}

// ReturnPathFromURL reads a return location as Argo CD's UI sends it in
// return_url: an absolute URL of this site (origin, the public origin) or a
// path. An absolute URL of another origin, or anything unparseable, gives
// "/"; what is kept is always SafeReturnPath's.
func ReturnPathFromURL(raw, origin string) string {
	if strings.HasPrefix(raw, "/") {
		return SafeReturnPath(raw)
	}
	o, ok := Origin(raw)
	if !ok || origin == "" || o != origin {
		return "/"
	}
	u, err := url.Parse(raw)
	if err != nil || u.User != nil {
		return "/"
	}
	p := u.EscapedPath()
	if p == "" {
		p = "/"
	}
	if u.RawQuery != "" {
		p += "?" + u.RawQuery
	}
	if u.Fragment != "" {
		p += "#" + u.EscapedFragment()
	}
	return SafeReturnPath(p)
}
