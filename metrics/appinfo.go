package metrics

import (
	"bufio"
	"compress/gzip"
	"io"
	"net/http"
	"strings"

	"github.com/prometheus/common/expfmt"

	"github.com/hanzoai/deploy/projection"
)

// argocd_app_info has a series for every row, 50,000 at Argo CD's largest
// scale. Built as registry metrics, each scrape made ten label pairs a row
// (about 80 MB of garbage at that scale, a fifth of what deployd allocated
// while serving 100 changes a second). It is written out directly instead,
// a line a row, after the registry's families; a scrape is answered in
// the text format whatever its Accept header offers.

// appInfoHead is the family's help and type lines.
const appInfoHead = "# HELP argocd_app_info Information about application.\n# TYPE argocd_app_info gauge\n"

// serveMetrics answers GET /metrics: the registry's families, then
// argocd_app_info, gzipped when the scraper takes it.
func (m *Metrics) serveMetrics(w http.ResponseWriter, r *http.Request) {
	mfs, err := m.reg.Gather()
	if err != nil {
		http.Error(w, "metrics could not be gathered: "+err.Error(), http.StatusInternalServerError)
		return
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	h := w.Header()
	h.Set("Content-Type", string(format))
	h.Add("Vary", "Accept-Encoding")
	var out io.Writer = w
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		zw := gzip.NewWriter(w)
		defer zw.Close()
		out = zw
	}
	bw := bufio.NewWriterSize(out, 64<<10)
	defer bw.Flush()
	enc := expfmt.NewEncoder(bw, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return // the scraper went away
		}
	}
	if m.src.Snapshot != nil {
		writeAppInfo(bw, m.src.Snapshot())
	}
}

// acceptsGzip says whether an Accept-Encoding header takes gzip.
func acceptsGzip(header string) bool {
	for part := range strings.SplitSeq(header, ",") {
		coding, params, _ := strings.Cut(part, ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

// writeAppInfo writes argocd_app_info for every row of snap (none, not
// even its head, when there are no rows).
func writeAppInfo(w *bufio.Writer, snap *projection.Snapshot) {
	head := false
	var line []byte
	write := func(a *projection.App) {
		if !head {
			w.WriteString(appInfoHead)
			head = true
		}
		line = appendAppInfo(line[:0], a)
		w.Write(line)
	}
	for a := range snap.Apps() {
		write(a)
	}
	for _, a := range snap.CDApplications() {
		write(a)
	}
}

// appendAppInfo appends a row's argocd_app_info line, with the values GET
// /v1/deploy/applications answers for it, labels in Argo CD's order.
func appendAppInfo(b []byte, a *projection.App) []byte {
	dest := a.Destination()
	sync := string(a.Sync)
	if sync == "" {
		sync = string(projection.SyncUnknown)
	}
	health := string(a.Health.Status)
	if health == "" {
		health = "Unknown"
	}
	// The operator reconciles an App whenever it changes, as Argo CD's
	// automated sync does; a CD Application's policy is not read.
	autosync := a.Row == projection.RowApp
	b = append(b, "argocd_app_info{"...)
	for i, lv := range [...]struct{ name, value string }{
		{"namespace", a.Namespace}, {"name", a.Name}, {"project", a.Project}, {"autosync_enabled", boolLabel(autosync)},
		{"repo", a.RepoURL()}, {"dest_server", dest.Server}, {"dest_namespace", dest.Namespace},
		{"sync_status", sync}, {"health_status", health}, {"operation", operation(a)},
	} {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, lv.name...)
		b = append(b, '=', '"')
		b = appendLabelValue(b, lv.value)
		b = append(b, '"')
	}
	return append(b, "} 1\n"...)
}

// appendLabelValue appends v escaped as the text format wants a label
// value: backslash, double quote and line feed.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, '\\', '\\')
		case '"':
			b = append(b, '\\', '"')
		case '\n':
			b = append(b, '\\', 'n')
		default:
			b = append(b, c)
		}
	}
	return b
}
