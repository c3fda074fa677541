package idp

import (
	"html/template"
	"net/http"
	"net/url"
	"sort"

	"github.com/oauth2-proxy/mockoidc"
)

// pageData is what the sign-in page shows.
type pageData struct {
	Action   string
	Hidden   []field
	Users    []User
	Param    string
	ReturnTo string
}

type field struct{ Name, Value string }

var page = template.Must(template.New("signin").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex">
<title>Demo sign-in · deployd</title>
<style>
  body { font: 15px/1.5 system-ui, sans-serif; margin: 0; background: #f6f7f9; color: #1d2330; }
  .banner { background: #b42318; color: #fff; padding: 14px 20px; font-weight: 600; text-align: center; }
  .banner small { display: block; font-weight: 400; opacity: .9; }
  main { max-width: 560px; margin: 32px auto; padding: 0 16px; }
  h1 { font-size: 22px; margin: 0 0 4px; }
  p.muted { color: #5b6475; margin: 0 0 20px; }
  form { margin: 0; }
  button { display: block; width: 100%; text-align: left; background: #fff; border: 1px solid #d5d9e0; border-radius: 8px;
           padding: 14px 16px; margin: 0 0 12px; cursor: pointer; font: inherit; color: inherit; }
  button:hover, button:focus { border-color: #3b5bdb; outline: none; box-shadow: 0 0 0 3px #dbe4ff; }
  .name { font-weight: 600; }
  .claims { font: 12px/1.4 ui-monospace, monospace; color: #5b6475; }
  .role { display: block; margin-top: 4px; }
</style>
</head>
<body>
<div class="banner" role="alert">DEMO IDENTITIES — NOT REAL ACCOUNTS
  <small>Anyone who can open this page can sign in as any of these users, including the SuperAdmin. This page exists only in <code>deployd demo</code>.</small>
</div>
<main>
  <h1>Choose who you are</h1>
  <p class="muted">You will be signed in to deployd{{if .ReturnTo}} at {{.ReturnTo}}{{end}} as the user you pick.</p>
  <form method="get" action="{{.Action}}">
    {{range .Hidden}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
    {{end}}
    {{range .Users}}<button type="submit" name="{{$.Param}}" value="{{.Subject}}">
      <span class="name">{{.Name}}</span> <span class="claims">{{.Username}} · owner={{.Org}} · isAdmin={{.OrgAdmin}}</span>
      <span class="role">{{.Role}}</span>
    </button>
    {{end}}
  </form>
</main>
</body>
</html>
`))

// page answers an acceptable authorization request with the sign-in page:
// one button per user, each resubmitting the request as it came, plus the
// chosen user.
func (p *IdP) page(w http.ResponseWriter, r *http.Request) {
	d := pageData{Action: mockoidc.AuthorizationEndpoint, Users: p.users, Param: UserParam}
	keys := make([]string, 0, len(r.Form))
	for k := range r.Form {
		if k != UserParam {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		for _, v := range r.Form[k] {
			d.Hidden = append(d.Hidden, field{k, v})
		}
	}
	if u, err := url.Parse(r.Form.Get("redirect_uri")); err == nil && u.Host != "" {
		d.ReturnTo = u.Scheme + "://" + u.Host
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "no-referrer")
	if err := page.Execute(w, d); err != nil {
		p.log.Warn("render the demo sign-in page", "err", err)
	}
}
