package clustertest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestMaintenanceBudget: a 10,000-App fleet's store (about 350,000
// revisions) gets minutes for each step, far past the 5 s of an ordinary
// call, and the budget never shrinks as the store grows.
func TestMaintenanceBudget(t *testing.T) {
	if got := maintenanceBudget(1_000); got != 5*time.Minute {
		t.Errorf("budget at revision 1,000: got %s, want 5m", got)
	}
	if got := maintenanceBudget(353_139); got < 10*time.Minute {
		t.Errorf("budget at revision 353,139 (the 10,000-App fleet): got %s, want 10m or more", got)
	}
	prev := time.Duration(0)
	for rev := int64(0); rev <= 2_000_000; rev += 7_919 {
		b := maintenanceBudget(rev)
		if b < prev {
			t.Fatalf("budget at revision %d is %s, less than %s before it", rev, b, prev)
		}
		prev = b
	}
}

// TestMaintainNamesStepAndDuration: a step that runs past its budget fails
// with the step's name and how long it ran, not a bare deadline.
func TestMaintainNamesStepAndDuration(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stall)
	e := &etcd{url: srv.URL}
	err := e.maintain(context.Background(), "defragment etcd", "/v3/maintenance/defragment", struct{}{}, 200*time.Millisecond)
	if err == nil {
		t.Fatal("a stalled step succeeded")
	}
	msg := err.Error()
	for _, want := range []string{"defragment etcd", "failed after 2", "budget 200ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
}
