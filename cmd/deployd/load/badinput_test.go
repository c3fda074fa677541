package load

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hanzoai/deploy/cluster/clustertest"
)

// Seeds of the project's fuzz targets (the f.Add values of FuzzParseRef,
// FuzzListQuery, FuzzDecodedParams, FuzzParseLastEventID, FuzzParseFields,
// FuzzParseSelector, FuzzParseRequest, FuzzSafeReturnPath,
// FuzzReturnPathFromURL and the cookie targets), joined at run time by the
// stored corpora (*/testdata/fuzz/*/*).
var (
	seedValues = []string{
		"web", "iam", "%69am", "%2540", "a/b", "v3.2.1", "v3.1.0@sha256:4f2b", ":Service:hanzo:iam",
		"apps:Deployment:tenant-acme:web", "..", "%", "%zz", "\x00", "WEB", strings.Repeat("a", 70),
		":Secret:hanzo:x", "v1:Secret:hanzo:x", "hanzo.ai:App:hanzo:iam", ":::", "a:b:c:d:e", "", ":Pod:hanzo:web-1.2", "\x00:Pod:a:b",
	}
	seedQueries = []string{
		"name=web", "projects=a,b&projects=c", "selector=a%3Db,c+in+(d)", "selector=!!!", "fields=items.metadata.name",
		"appNamespace=hanzo", "fields=items..x", "selector=a%3D%3D%3Db", "x=1", "name=a&name=b", "selector=" + strings.Repeat("a", 300),
		"name=web&projects=shop,ops&selector=hanzo.ai/env%3Dmain&appNamespace=tenant-acme&fields=result.type&resourceVersion=12",
		"projects=&projects=%2C&fields=-&name=", "selector=a%20in%20(b", "resourceVersion=abc", "bogus=1",
		"fields=-result.application.status.history", "fields=result..x", "fields=,,,", "fields=result." + strings.Repeat("a.", 200),
		"selector=hanzo.ai/org+in+(acme,globex)", "selector=!hanzo.ai/org", "selector=a!%3Db,c", "selector=a%3D%3D", "selector=x+in+(",
		"selector=a>1", "env=production", "env=", "namespace=%00", "return=//evil", "return=https://evil",
	}
	seedIDs   = []string{"", "0", "1", "1761234567000123", " 42 ", "18446744073709551615", "18446744073709551616", "-1", "0x10", "１２", "9\x00"}
	seedPaths = []string{
		"/", "/apps?x=1#y", "//evil", `/\evil`, "https://evil", "javascript:x", "/a\tb", "/%2F%2Fevil",
		"/.//evil", "/\u3000", "", "\x00", "/:x", "/a:b", "/@evil", "/?//evil",
		"https://deploy.example.com/applications?x=1", "https://evil/x", "/a", "https://deploy.example.com//evil",
		"https://deploy.example.com/%2F%2Fevil", "https://deploy.example.com/\\evil", "https://deploy.example.com@evil/",
	}
	seedCookies = []string{"", "AQ", strings.Repeat("A", 60), "seed-a", "%", "a;b", strings.Repeat("x", 5000)}
)

// routes with a parameter (%s) that bad values are put into.
var badRoutes = []string{
	"/v1/deploy/applications/%s", "/v1/deploy/%s/tree", "/v1/deploy/web/resource/%s", "/v1/deploy/%s/logs",
	"/v1/paas/apps/%s?env=main", "/v1/deploy/applications/web/revisions/%s/metadata", "/api/v1/applications/%s",
	"/api/v1/applications/%s/resource-tree", "/v1/deploy/stream/applications/%s/resource-tree", "/%s",
	"/v1/deploy/login?return=%s", "/auth/login?return_url=%s", "/v1/deploy/callback?state=%s&code=x",
}

// query routes that bad queries are sent to.
var queryRoutes = []string{"/v1/deploy/applications", "/api/v1/applications", "/v1/deploy/stream/applications", "/v1/paas/apps", "/v1/paas/stream/apps"}

// fuzzCorpus reads the stored fuzz inputs' string values.
func fuzzCorpus(tb testing.TB) []string {
	tb.Helper()
	files, _ := filepath.Glob("../../../*/testdata/fuzz/*/*")
	var out []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.SplitSeq(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "string("); ok {
				if s, err := strconv.Unquote(strings.TrimSuffix(v, ")")); err == nil {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// badRequest is one raw request: the request line's target and headers.
type badRequest struct {
	target  string
	headers []string
}

// badInputs builds n requests, each malformed in one of five ways (path,
// query, Last-Event-ID, cookie, bearer token), from the seeds, the corpus
// and mutations of them (cut, doubled, escaped, random bytes). Raw requests
// carry any byte but CR and LF (which would split one request into two).
func badInputs(n int, corpus []string, good string, rng *rand.Rand) []badRequest {
	values := append(append(append(append([]string(nil), seedValues...), seedIDs...), seedPaths...), corpus...)
	mutate := func(s string) string {
		switch rng.IntN(6) {
		case 0:
			return s
		case 1:
			return s[:rng.IntN(len(s)+1)]
		case 2:
			return s + s
		case 3:
			return url.PathEscape(s)
		case 4:
			return url.QueryEscape(url.QueryEscape(s))
		default:
			b := []byte(s)
			for range 1 + rng.IntN(4) {
				b = append(b, byte(rng.IntN(256)))
			}
			return string(b)
		}
	}
	pick := func(l []string) string { return mutate(l[rng.IntN(len(l))]) }
	clean := func(s string) string { return strings.NewReplacer("\r", "%0D", "\n", "%0A").Replace(s) }
	bearer := []string{"Authorization: Bearer " + good}
	out := make([]badRequest, n)
	for i := range out {
		var r badRequest
		switch i % 5 {
		case 0: // paths
			r.target = fmt.Sprintf(badRoutes[rng.IntN(len(badRoutes))], pick(values))
			r.headers = bearer
		case 1: // queries
			q := pick(seedQueries)
			if rng.IntN(2) == 0 {
				q += "&" + pick(seedQueries)
			}
			r.target = queryRoutes[rng.IntN(len(queryRoutes))] + "?" + q
			r.headers = bearer
		case 2: // Last-Event-IDs
			r.target = "/v1/deploy/stream/applications"
			r.headers = append(bearer, "Last-Event-ID: "+pick(append(seedIDs, corpus...)))
		case 3: // cookies, without a bearer token
			name := []string{"deploy_session.0", "__Host-deploy_session.0", "deploy_flow", "argocd.token", ""}[rng.IntN(5)]
			r.target = []string{"/v1/deploy/applications", "/v1/deploy/session/userinfo", "/v1/deploy/callback?state=s&code=c", "/api/v1/session/userinfo"}[rng.IntN(4)]
			r.headers = []string{"Cookie: " + name + "=" + pick(append(seedCookies, values...))}
		default: // bearer tokens
			tok := good
			switch rng.IntN(6) {
			case 0:
				tok = tok[:rng.IntN(len(tok))]
			case 1: // a changed signature
				b := []byte(tok)
				b[len(b)-1-rng.IntN(10)] ^= 1
				tok = string(b)
			case 2:
				tok = "eyJhbGciOiJub25lIn0." + tok[strings.IndexByte(tok, '.')+1:strings.LastIndexByte(tok, '.')] + "."
			case 3:
				tok = pick(values)
			case 4:
				tok = strings.Repeat(tok, 1+rng.IntN(3))
			}
			scheme := []string{"Bearer ", "bearer ", "Basic ", "Bearer  ", ""}[rng.IntN(5)]
			r.target = []string{"/v1/deploy/applications", "/v1/deploy/stream/applications", "/api/v1/applications", "/v1/paas/apps"}[rng.IntN(4)]
			r.headers = []string{"Authorization: " + scheme + tok}
		}
		r.target = clean(r.target)
		for j, h := range r.headers {
			r.headers[j] = clean(h)
		}
		out[i] = r
	}
	return out
}

// badResults counts answers by status class.
type badResults struct {
	byClass   [6]atomic.Int64 // 0: no answer (connection closed)
	mu        sync.Mutex
	examples5 []string
}

// sendBad sends requests over kept-alive raw connections, workers at once,
// and reads each answer's status; a stream that is answered 200 is closed
// at once.
func sendBad(ctx context.Context, addr string, reqs []badRequest, workers int, res *badResults) {
	jobs := make(chan badRequest)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			var conn net.Conn
			var br *bufio.Reader
			defer func() {
				if conn != nil {
					conn.Close()
				}
			}()
			for r := range jobs {
				if conn == nil {
					c, err := net.DialTimeout("tcp", addr, 5*time.Second)
					if err != nil {
						res.byClass[0].Add(1)
						continue
					}
					conn, br = c, bufio.NewReader(c)
				}
				_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
				var b strings.Builder
				fmt.Fprintf(&b, "GET %s HTTP/1.1\r\nHost: %s\r\n", r.target, addr)
				for _, h := range r.headers {
					b.WriteString(h + "\r\n")
				}
				b.WriteString("\r\n")
				resp, err := sendRaw(conn, br, b.String())
				if err != nil {
					res.byClass[0].Add(1)
					conn.Close()
					conn = nil
					continue
				}
				res.byClass[resp.StatusCode/100].Add(1)
				if resp.StatusCode >= 500 {
					res.mu.Lock()
					if len(res.examples5) < 5 {
						res.examples5 = append(res.examples5, fmt.Sprintf("%d for %q %q", resp.StatusCode, r.target, r.headers))
					}
					res.mu.Unlock()
				}
				if resp.Close || strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
					conn.Close()
					conn = nil
				} else if err := drain(resp); err != nil {
					conn.Close()
					conn = nil
				}
			}
		})
	}
	for _, r := range reqs {
		select {
		case jobs <- r:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
}

func sendRaw(conn net.Conn, br *bufio.Reader, req string) (*http.Response, error) {
	if _, err := conn.Write([]byte(req)); err != nil {
		return nil, err
	}
	return http.ReadResponse(br, &http.Request{Method: http.MethodGet})
}

func drain(resp *http.Response) error {
	defer resp.Body.Close()
	_, err := io.Copy(io.Discard, resp.Body)
	return err
}

// chaosBadInput: malformed paths, queries, Last-Event-IDs, cookies and
// bearer tokens at volume against deployd while clients stream and the
// fleet changes. Promise: no answer is a 5xx, the log holds no panic, the
// streaming clients' views still equal the API server's LIST, and deployd's
// RSS comes back within 10 % of what it was before. The Go runtime returns
// freed memory lazily (its background scavenger, paced by GC cycles, which
// the changes keep coming): RSS is read from /proc until it is within
// 10 %, up to the scale's convergence deadline; it is not forced (deployd
// has no endpoint to force a GC, and forcing one would not show what a
// running deployd does).
func chaosBadInput(t *testing.T, e *chaosEnv, row *chaosRow) {
	n := e.sc.badRequests
	row.scenario = "5. bad input at volume"
	row.checked = fmt.Sprintf("%d malformed paths, queries, Last-Event-IDs, cookies, bearer tokens (fuzz seeds and corpora) with %d clients streaming, %d changes/s: no 5xx, no panic, views = LIST, RSS back within 10%%", n, e.sc.loadClients, e.sc.rate)
	cs, stopClients := e.clients(t, e.sc.loadClients, e.hc)
	defer stopClients()
	if !waitAll(t, cs, e.sc.converge, "synced", func(_ int, c *esClient) bool { return c.synced() }) {
		return
	}
	stopChanger := e.runChanger(t, e.sc.rate)
	defer stopChanger()
	loadFor(t.Context(), e.sc.steady)
	pid := e.d.PID()
	rss0, _ := clustertest.ProcMemory(t, pid)
	heap0, subs0, g0 := e.d.metric(t, "go_memstats_heap_inuse_bytes"), e.d.metric(t, "deployd_stream_subscribers"), e.d.metric(t, "go_goroutines")
	corpus := fuzzCorpus(t)
	if len(corpus) == 0 {
		t.Error("no fuzz corpus found under */testdata/fuzz")
	}
	reqs := badInputs(n, corpus, e.token, rand.New(rand.NewPCG(1, 2)))
	var res badResults
	start := time.Now()
	sendBad(t.Context(), strings.TrimPrefix(e.d.Base, "http://"), reqs, 16, &res)
	took := time.Since(start)
	rssPeak, _ := clustertest.ProcMemory(t, pid)

	backAt := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), e.sc.converge)
	defer cancel()
	var rss int64
	back := waitFor(ctx, func() bool {
		rss, _ = clustertest.ProcMemory(t, pid)
		return float64(rss) <= 1.1*float64(rss0)
	})
	backIn := time.Since(backAt)
	heap1, subs1, g1 := e.d.metric(t, "go_memstats_heap_inuse_bytes"), e.d.metric(t, "deployd_stream_subscribers"), e.d.metric(t, "go_goroutines")
	stopChanger()
	tr := e.truth(t)
	_, ok := e.converge(t, cs, tr)

	if c := res.byClass[5].Load(); c > 0 {
		t.Errorf("%d answers were 5xx, e.g. %q", c, res.examples5)
	}
	if e.d.panicked() {
		t.Errorf("deployd's log shows a panic:\n%s", tail(e.d.log.String(), 30))
	}
	if !back {
		t.Errorf("RSS %d MiB did not come back within 10%% of %d MiB in %s", rss>>20, rss0>>20, e.sc.converge)
	}
	if pid != e.d.PID() {
		t.Error("deployd restarted during the bad input")
	}
	row.note("%d requests in %s: %d 2xx, %d 3xx, %d 4xx, %d 5xx, %d not answered (connection closed)", n, took.Round(time.Millisecond),
		res.byClass[2].Load(), res.byClass[3].Load(), res.byClass[4].Load(), res.byClass[5].Load(), res.byClass[0].Load()+res.byClass[1].Load())
	row.note("RSS %d MiB before, %d MiB after, %d MiB %s later", rss0>>20, rssPeak>>20, rss>>20, backIn.Round(time.Second))
	row.note("heap in use %.0f → %.0f MiB, stream subscribers %v → %v, goroutines %v → %v", heap0/(1<<20), heap1/(1<<20), subs0, subs1, g0, g1)
	if ok && back {
		row.converge = fmt.Sprintf("RSS within 10%% %s after", backIn.Round(time.Second))
	}
}
