package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// appEvent is one event of the applications stream, decoded.
type appEvent struct {
	ID        string
	Type      string
	Namespace string
	Name      string
	Health    string
	Sync      string
	Revision  string
	Operation string // operationState.phase of a requested sync, "" when none (a rollout's own is automated)
	History   int
	Images    []string // status.summary.images
}

// sseFollower reads an applications stream in the background.
type sseFollower struct {
	mu     sync.Mutex
	events []appEvent
	done   chan struct{}
	cancel context.CancelFunc
}

// follow opens path with client c (and a bearer token when given) and
// collects its events until the test ends.
func follow(t *testing.T, c *http.Client, url, token string) *sseFollower {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		resp.Body.Close()
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	f := &sseFollower{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(f.done)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		var id string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				var m struct {
					Result struct {
						Type        string
						Application struct {
							Metadata struct{ Name, Namespace string }
							Status   struct {
								Sync           struct{ Status, Revision string }
								Health         struct{ Status string }
								OperationState *struct {
									Phase     string
									Operation struct{ InitiatedBy struct{ Automated bool } }
								}
								History []json.RawMessage
								Summary struct{ Images []string }
							}
						}
					}
				}
				if json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m) != nil || m.Result.Type == "" {
					continue
				}
				a := m.Result.Application
				ev := appEvent{ID: id, Type: m.Result.Type, Namespace: a.Metadata.Namespace, Name: a.Metadata.Name,
					Health: a.Status.Health.Status, Sync: a.Status.Sync.Status, Revision: a.Status.Sync.Revision, History: len(a.Status.History),
					Images: a.Status.Summary.Images}
				if a.Status.OperationState != nil && !a.Status.OperationState.Operation.InitiatedBy.Automated {
					ev.Operation = a.Status.OperationState.Phase
				}
				f.mu.Lock()
				f.events = append(f.events, ev)
				f.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-f.done })
	return f
}

// of returns the events seen so far for one app.
func (f *sseFollower) of(namespace, name string) []appEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []appEvent
	for _, e := range f.events {
		if e.Namespace == namespace && e.Name == name {
			out = append(out, e)
		}
	}
	return out
}

func (f *sseFollower) all() []appEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]appEvent(nil), f.events...)
}
