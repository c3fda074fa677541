package load

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// listTarget is one list a server answers, as vegeta requests it.
type listTarget struct {
	server string // "deployd", "API server", "limit"
	hc     *http.Client
	target vegeta.Target
}

// listResult is one closed-loop run against one target.
type listResult struct {
	concurrency     int
	requests, fails int
	p50, p99        time.Duration
	perSecond       float64 // successful requests a second
	bytes           int     // of one response, as sent on the wire
}

// plainTransport is HTTP/1.1 with keep-alive and no transparent
// decompression: "plain" asks for plain bytes, "gzip" sets Accept-Encoding
// itself and reads the compressed bytes. rootCAs, when set, is the only
// trust for TLS.
func plainTransport(rootCAs *x509.CertPool, conns int) *http.Client {
	tr := &http.Transport{
		DisableCompression:  true,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
	}
	if rootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, Timeout: 2 * time.Minute}
}

// get requests t once and returns its body and headers: the bytes the
// limit will replay, and the response size.
func (t listTarget) get(tb testing.TB) ([]byte, http.Header) {
	tb.Helper()
	req, err := t.target.Request()
	if err != nil {
		tb.Fatal(err)
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", t.server, t.target.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: %v", t.server, t.target.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s %s: %s: %.300s", t.server, t.target.URL, resp.Status, body)
	}
	if enc := t.target.Header.Get("Accept-Encoding"); enc != resp.Header.Get("Content-Encoding") {
		tb.Fatalf("%s %s asked for %q encoding, got %q", t.server, t.target.URL, enc, resp.Header.Get("Content-Encoding"))
	}
	return body, resp.Header
}

// attack runs a closed loop of concurrency workers (vegeta at rate 0:
// each worker sends its next request when its last one is answered) on t
// for d and returns vegeta's figures.
func (t listTarget) attack(tb testing.TB, concurrency int, d time.Duration) listResult {
	tb.Helper()
	a := vegeta.NewAttacker(
		vegeta.Client(t.hc),
		vegeta.Workers(uint64(concurrency)),
		vegeta.MaxWorkers(uint64(concurrency)),
		vegeta.MaxBody(0), // read every byte, keep none
	)
	var m vegeta.Metrics
	r := listResult{concurrency: concurrency}
	for res := range a.Attack(vegeta.NewStaticTargeter(t.target), vegeta.Rate{}, d, t.server) {
		m.Add(res)
		if res.Error != "" || res.Code != http.StatusOK {
			if r.fails++; r.fails == 1 {
				tb.Logf("%s %s: %d %s", t.server, t.target.URL, res.Code, res.Error)
			}
		}
	}
	m.Close()
	r.requests = int(m.Requests)
	r.p50, r.p99, r.perSecond = m.Latencies.P50, m.Latencies.P99, m.Throughput
	return r
}

// itemCount is the number of items of a JSON list (a check that two
// servers' lists hold the same rows, not a figure).
func itemCount(tb testing.TB, body []byte) int {
	tb.Helper()
	var l struct{ Items []json.RawMessage }
	if err := json.Unmarshal(body, &l); err != nil {
		tb.Fatalf("not a JSON list: %v: %.200s", err, body)
	}
	return len(l.Items)
}

// listRow is a list measured on every server at one concurrency.
type listRow struct {
	name                string
	deployd, api, limit listResult
	// limitHere is the limit's handler in the harness's own process, at
	// the first concurrency only (zero elsewhere): what the limit would
	// answer without a process of its own.
	limitHere listResult
}

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}, "Accept": {"application/json"}}
}

func withGzip(h http.Header, gz bool) http.Header {
	h = h.Clone()
	if gz {
		h.Set("Accept-Encoding", "gzip")
	}
	return h
}

func (r listResult) String() string {
	return fmt.Sprintf("c%d: %d requests (%d failed), p50 %s, p99 %s, %.1f/s, %d B", r.concurrency, r.requests, r.fails, r.p50, r.p99, r.perSecond, r.bytes)
}
