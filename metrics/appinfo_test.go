package metrics

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// FuzzAppInfoLabelValue: a label value written by appendLabelValue reads
// back, through the text format's own parser, as the value it was.
func FuzzAppInfoLabelValue(f *testing.F) {
	for _, s := range []string{"", "hanzo", `a"b`, `back\slash`, "line\nfeed", `\n`, `"\`, "ünïcode"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if !utf8.ValidString(v) {
			return // label values are UTF-8; rows' come from JSON
		}
		line := "m{l=\"" + string(appendLabelValue(nil, v)) + "\"} 1\n"
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(strings.NewReader(line))
		if err != nil {
			t.Fatalf("%q written as %q does not parse: %v", v, line, err)
		}
		if got := fams["m"].GetMetric()[0].GetLabel()[0].GetValue(); got != v {
			t.Fatalf("%q written as %q reads back as %q", v, line, got)
		}
	})
}

// TestScrapeEncodings: a scraper that takes gzip gets the exposition
// gzipped, one that does not gets it plain; both hold argocd_app_info and
// the registry's families, in the text format.
func TestScrapeEncodings(t *testing.T) {
	m, _ := newFleetMetrics(t)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var bodies []string
	for _, enc := range []string{"gzip", "identity"} {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Accept-Encoding", enc)
		req.Header.Set("Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited")
		resp, err := http.DefaultTransport.RoundTrip(req) // no transparent gunzip
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
			t.Fatalf("%s: Content-Type %q, want the text format", enc, ct)
		}
		if got := resp.Header.Get("Content-Encoding"); (got == "gzip") != (enc == "gzip") {
			t.Fatalf("asked for %s, got Content-Encoding %q", enc, got)
		}
		if enc == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(raw))
			if err != nil {
				t.Fatal(err)
			}
			if raw, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		bodies = append(bodies, string(raw))
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", enc, err)
		}
		for _, name := range []string{"argocd_app_info", "deployd_apps", "argocd_cluster_info", "go_goroutines"} {
			if fams[name] == nil {
				t.Errorf("%s: no %s", enc, name)
			}
		}
	}
	if strip := func(s string) string { return s[strings.Index(s, "# HELP argocd_app_info"):] }; strip(bodies[0]) != strip(bodies[1]) {
		t.Error("argocd_app_info differs between the gzipped and the plain answer")
	}
}

// BenchmarkScrape scrapes the golden fleet's metrics: bytes allocated per
// scrape, most of them argocd_app_info's before it was written directly.
func BenchmarkScrape(b *testing.B) {
	m, _ := newFleetMetrics(b)
	h := m.Handler()
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
	}
}
