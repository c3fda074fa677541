package projection

import (
	"encoding/json"
	"testing"
)

// TestHistoryInitiatedBy: every status.history entry carries initiatedBy,
// as Argo CD's do (its UI reads initiatedBy.username on each): the user
// whose sync asked for the newest release, else automated.
func TestHistoryInitiatedBy(t *testing.T) {
	cfg := DefaultConfig()
	a := &App{AppMeta: &AppMeta{Name: "web", Namespace: "hanzo", cfg: &cfg}, AppRollout: &AppRollout{
		History:   []HistoryEntry{{ID: 1, Revision: "v1"}, {ID: 2, Revision: "v2"}},
		Operation: &SyncOp{Phase: "Succeeded", Revision: "v2", InitiatedBy: "alice@hanzo.ai"},
	}}
	decode := func() []map[string]any {
		t.Helper()
		var app struct {
			Status struct {
				History []map[string]any `json:"history"`
			} `json:"status"`
		}
		if err := json.Unmarshal(mustJSON(a.Application()), &app); err != nil {
			t.Fatal(err)
		}
		return app.Status.History
	}
	h := decode()
	if len(h) != 2 {
		t.Fatalf("%d history entries, want 2", len(h))
	}
	for i, want := range []map[string]any{{"automated": true}, {"username": "alice@hanzo.ai", "automated": false}} {
		got, _ := h[i]["initiatedBy"].(map[string]any)
		if len(got) != len(want) || got["automated"] != want["automated"] || got["username"] != want["username"] {
			t.Errorf("entry %d: initiatedBy %v, want %v", i+1, h[i]["initiatedBy"], want)
		}
	}
	// A sync for another revision says nothing of the newest release.
	a.Operation.Revision = "v3"
	if got, _ := decode()[1]["initiatedBy"].(map[string]any); got["automated"] != true {
		t.Errorf("with a sync for another revision: initiatedBy %v, want automated", got)
	}
}
