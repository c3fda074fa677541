package metrics

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestRequestCodeLabel: a request's code label is its status, "0" for one
// outside 100–599, and recording a request of a series that exists
// allocates nothing.
func TestRequestCodeLabel(t *testing.T) {
	for code := 100; code <= 599; code++ {
		if statusLabels[code] != strconv.Itoa(code) {
			t.Fatalf("code label of %d is %q", code, statusLabels[code])
		}
	}
	m := New(Sources{})
	m.SetRoutes([]string{"/r"})
	for _, code := range []int{204, 599, 99, 600, -1} {
		m.Request(http.MethodGet, "/r", code, time.Millisecond)
	}
	got := map[string]float64{}
	for _, s := range scrape(t, m)["deployd_http_requests_total"].GetMetric() {
		for _, l := range s.GetLabel() {
			if l.GetName() == "code" {
				got[l.GetValue()] = s.GetCounter().GetValue()
			}
		}
	}
	if want := map[string]float64{"204": 1, "599": 1, "0": 3}; len(got) != len(want) || got["204"] != 1 || got["599"] != 1 || got["0"] != 3 {
		t.Fatalf("requests by code %v, want %v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { m.Request(http.MethodGet, "/r", 204, time.Millisecond) }); n != 0 {
		t.Fatalf("recording a request allocates %v times, want 0", n)
	}
}
