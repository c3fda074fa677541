package release

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestOnRefreshReportsEachRefresh: Options.OnRefresh hears of every
// repository refresh, ok when its sources answered and not when one failed.
func TestOnRefreshReportsEachRefresh(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		wantOK bool
	}{
		{"answered", func(w http.ResponseWriter) { w.Header().Set("Content-Type", "application/json"); w.Write([]byte(`[]`)) }, true},
		{"failed", func(w http.ResponseWriter) { http.Error(w, `{"message":"down"}`, http.StatusBadGateway) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { tc.answer(w) }))
			t.Cleanup(srv.Close)
			var mu sync.Mutex
			var got []bool
			s, err := New(Config{GitHub: true, GitHubAPI: srv.URL, Refresh: time.Hour}, Options{
				Repositories: func() []string { return []string{forgeImage} },
				OnRefresh: func(ok bool, at time.Time) {
					mu.Lock()
					defer mu.Unlock()
					if !at.IsZero() {
						got = append(got, ok)
					}
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); s.Run(ctx) }()
			t.Cleanup(func() { cancel(); <-done })
			waitFor(t, "a refresh", func() bool { mu.Lock(); defer mu.Unlock(); return len(got) > 0 })
			mu.Lock()
			defer mu.Unlock()
			if got[0] != tc.wantOK || uint64(len(got)) != s.Stats().Refreshes {
				t.Errorf("OnRefresh got %v for %d refreshes, want ok=%v once per refresh", got, s.Stats().Refreshes, tc.wantOK)
			}
		})
	}
}
