package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/hanzoai/deploy/cluster/clustertest"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/stream/streamtest"
)

// scaleCookieKey is the key the two replicas of the resume share
// (DEPLOY_COOKIE_KEY): it signs their questions to each other.
const scaleCookieKey = "9c2e4a6b8d0f1e3c5a7b9d1f3e5c7a9b2d4f6e8a0c1e3b5d7f9a2c4e6b8d0f1e"

// resumeFigures are what the resume across replicas measured.
type resumeFigures struct {
	burst      int           // events of the first stream's initial list
	idBytes    int           // the stream's id as sent
	fullBytes  int           // the same position written whole
	missed     int           // events of the change made while the client was away
	resumed    time.Duration // from the reconnection to the last of them
	reset      bool
	duplicates int // events of the change it had seen, sent again
	spread     []int64
	// After the replica that made its last id was killed (kill -9): the
	// client, on the one left, was reset (killReset), within killReset
	// of connecting, then sent killBurst ADDED events.
	killReset   bool
	killResetIn time.Duration
	killBurst   int
	// Or the replica left held the id (killResumed): the client got
	// killAfter events of a change made since, and killTwice others.
	killResumed          bool
	killAfter, killTwice int
	killDue              int // the change's events, one per alias
}

// resumeAcrossReplicas starts two replicas over the clusters, peers of
// each other, and moves one client between them: it streams from the
// first, sees a change of one App of a real server (an event in each of
// its aliases), goes away, another App changes, and it comes back to the
// second with its last id. The second holds none of the first's compact
// ids: it asks its peer, and must replay exactly the change the client
// missed, with no reset and nothing it had. The client reaches them
// through a Service (round robin over the ready replicas), as it would in
// a cluster: its first connection goes to the first replica, its second to
// the second.
//
// Then the second replica, whose id the client holds, is killed (kill -9)
// while the client is away, and the client lands on the first. When the
// first named the same position itself, it holds the id and resumes the
// client exactly; otherwise no live replica holds it, and the first
// resets the client and sends the whole list again. Never a guess.
func resumeAcrossReplicas(b testing.TB, bin string, setup serveSetup, m *mockoidc.MockOIDC, token string, apis []*clustertest.Cluster, aliases int, apps []string) resumeFigures {
	b.Helper()
	addrA, addrB := freeAddr(b), freeAddr(b)
	env := []string{"DEPLOY_COOKIE_KEY=" + scaleCookieKey, "DEPLOY_PEERS=http://" + addrA + ",http://" + addrB}
	setup.addr, setup.env = addrA, env
	a := startServe(b, bin, setup, m)
	defer a.stop()
	setup.addr = addrB
	rb := startServe(b, bin, setup, m)
	defer rb.stop()
	svc := clustertest.StartService(b, clustertest.Backend{Addr: addrA, Health: a.base + "/v1/deploy/health"},
		clustertest.Backend{Addr: addrB, Health: rb.base + "/v1/deploy/health"})
	svc.WaitReady(b, time.Minute)

	var f resumeFigures
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	s := openScaleStream(ctx, b, svc.Base, "", token, "")
	for {
		ev := s.next(b)
		if ev.id != "" {
			f.idBytes = len(ev.id)
			s.lastID = ev.id
			break
		}
		if ev.data != "" {
			f.burst++
		}
	}
	f.fullBytes = len(scalePosition(b, a.base, token, appName(apps[0])))

	// Each change is an App's label in one real server: one event in each
	// of that server's aliases (and the first cluster when it is server 0).
	seenApp, missedApp := apps[0], apps[1]
	per := aliasesOf(1, len(apis), aliases)
	patchApp(ctx, b, apis[1], seenApp, "bench-seen")
	for got := 0; got < per || s.lastID == "" || s.pendingData; {
		ev := s.next(b)
		if ev.data != "" {
			s.pendingData = true
			if strings.Contains(ev.data, `"name":"`+appName(seenApp)+`"`) {
				got++
			}
		}
		if ev.id != "" {
			s.lastID, s.pendingData = ev.id, false
		}
	}
	s.close()
	id := s.lastID

	patchApp(ctx, b, apis[2], missedApp, "bench-missed")
	perMissed := aliasesOf(2, len(apis), aliases)
	// Wait until the second replica folded the change, so the time below
	// is the resume's, not the watch's.
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(string(getBody(b, rb.base+"/api/v1/applications/"+appName(missedApp)+"?appNamespace="+appNS(missedApp)+"."+scaleAlias(2), token)), `"bench-missed"`) {
		if time.Now().After(deadline) {
			b.Fatal("the second replica did not fold the change within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	began := time.Now()
	s = openScaleStream(ctx, b, svc.Base, "", token, id)
	f.spread = svc.Spread()
	for f.missed < perMissed {
		ev := s.next(b)
		if ev.id != "" {
			s.lastID = ev.id
		}
		switch {
		case ev.event == "reset":
			f.reset = true
			return f
		case strings.Contains(ev.data, `"name":"`+appName(missedApp)+`"`):
			f.missed++
		case strings.Contains(ev.data, `"name":"`+appName(seenApp)+`"`):
			f.duplicates++
		}
	}
	f.resumed = time.Since(began)
	// Anything more within a moment would be sent twice.
	s.deadline(2 * time.Second)
	for {
		ev, ok := s.tryNext()
		if !ok {
			break
		}
		if ev.id != "" {
			s.lastID = ev.id
		}
		if strings.Contains(ev.data, `"name":"`+appName(seenApp)+`"`) || strings.Contains(ev.data, `"name":"`+appName(missedApp)+`"`) {
			f.duplicates++
		}
	}
	s.close()
	id = s.lastID

	rb.stop() // SIGKILL: its ids go with it
	// The replica left holds the id too when it folded the same changes
	// into the same position and named it itself (an id is the digest of
	// its position, alike on every replica): then the client resumes
	// there, exactly. Otherwise no live replica holds the id and the
	// client must be reset. A change made now tells the two apart: a
	// resumed client gets its events and nothing else, a reset one the
	// whole list first.
	began = time.Now()
	s = openScaleStream(ctx, b, svc.Base, "", token, id)
	defer s.close()
	patchApp(ctx, b, apis[1], seenApp, "bench-after-kill")
	f.killDue = per
	pending := false
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if time.Now().After(deadline) {
			b.Fatalf("after a kill -9 of the replica of the client's id: no reset and %d of the %d events of a change made since, within 2 minutes", f.killAfter, per)
		}
		ev := s.next(b)
		if ev.event == "reset" {
			f.killReset, f.killResetIn = true, time.Since(began)
			continue
		}
		if ev.data != "" {
			pending = true
			switch {
			case f.killReset:
				f.killBurst++
			case strings.Contains(ev.data, `"name":"`+appName(seenApp)+`"`) && strings.Contains(ev.data, `"bench-after-kill"`):
				f.killAfter++
			default:
				f.killTwice++ // resumed, and sent what it had
			}
		}
		if ev.id != "" {
			pending = false
		}
		switch {
		case f.killReset && ev.id != "":
			return f // the burst's last event carries the id
		case !f.killReset && f.killAfter >= per && !pending:
			f.killResumed = true
			return f
		}
	}
}

func (f resumeFigures) String() string {
	return fmt.Sprintf("first stream's list %d events, its id %d bytes (the position written whole: %d); %d events missed while away, resumed on the other replica in %s, reset %v, %d sent twice; connections per replica %v; "+
		"after a kill -9 of the replica of its id: %s",
		f.burst, f.idBytes, f.fullBytes, f.missed, f.resumed.Round(time.Millisecond), f.reset, f.duplicates, f.spread, f.afterKill())
}

func (f resumeFigures) afterKill() string {
	if f.killResumed {
		return fmt.Sprintf("resumed on the one left, which held the id; %d of the %d events of a change made since, %d others", f.killAfter, f.killDue, f.killTwice)
	}
	return fmt.Sprintf("reset %v in %s, then %d events", f.killReset, f.killResetIn.Round(time.Millisecond), f.killBurst)
}

// check says what of the resume is wrong, if anything: a reset, an event
// sent twice, an id that is not compact, connections that did not go one
// to each replica, or, once the replica of the client's id was killed,
// neither an exact resume on the one left nor a reset and the whole list
// of apps Apps.
func (f resumeFigures) check(apps int) error {
	switch {
	case f.reset || f.duplicates > 0 || f.idBytes > 64:
		return fmt.Errorf("resume across replicas: reset %v, %d events sent twice, id of %d bytes: want no reset, none twice, a compact id", f.reset, f.duplicates, f.idBytes)
	case f.fullBytes <= 512:
		return fmt.Errorf("resume across replicas: the position written whole is %d bytes, which goes out whole: want more clusters", f.fullBytes)
	case !slices.Equal(f.spread, []int64{1, 1}):
		return fmt.Errorf("resume across replicas: connections per replica %v, want one to each", f.spread)
	case f.killResumed && (f.killTwice > 0 || f.killAfter != f.killDue):
		return fmt.Errorf("after a kill -9 of the replica of the client's id: %s: want exactly the change's events", f.afterKill())
	case !f.killResumed && (!f.killReset || f.killBurst < apps):
		return fmt.Errorf("after a kill -9 of the replica of the client's id: %s: want a reset, then every one of the %d Apps", f.afterKill(), apps)
	}
	return nil
}

// aliasesOf is how many of the clusters are of server i (cluster c is of
// server c % servers).
func aliasesOf(i, servers, clusters int) int {
	n := 0
	for c := range clusters {
		if c%servers == i {
			n++
		}
	}
	return n
}

func appNS(a string) string   { ns, _, _ := strings.Cut(a, "/"); return ns }
func appName(a string) string { _, n, _ := strings.Cut(a, "/"); return n }

// patchApp sets the image tag of App a ("namespace/name") of c to v.
func patchApp(ctx context.Context, b testing.TB, c *clustertest.Cluster, a, v string) {
	b.Helper()
	if err := tagApp(ctx, c, a, v); err != nil {
		b.Fatal(err)
	}
}

// tagApp is patchApp for any goroutine.
func tagApp(ctx context.Context, c *clustertest.Cluster, a, v string) error {
	patch := fmt.Sprintf(`{"spec":{"image":{"tag":%q}}}`, v)
	if _, err := c.Dynamic().Resource(projection.KindApp.GVR()).Namespace(appNS(a)).Patch(ctx, appName(a), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch App %s: %w", a, err)
	}
	return nil
}

// scalePosition is the metadata.resourceVersion of a list (of the Apps
// named name): the position written whole.
func scalePosition(b testing.TB, base, token, name string) string {
	b.Helper()
	body := string(getBody(b, base+"/api/v1/applications?name="+name, token))
	_, rest, ok := strings.Cut(body, `"resourceVersion":"`)
	if !ok {
		b.Fatalf("no resourceVersion in the list: %.200s", body)
	}
	pos, _, _ := strings.Cut(rest, `"`)
	return pos
}

// getBody GETs url with token and returns its body; anything but 200
// fails.
func getBody(b testing.TB, url, token string) []byte {
	b.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&sb); err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		b.Fatalf("GET %s: %s %.200s", url, resp.Status, sb.String())
	}
	return []byte(sb.String())
}

// scaleStream is one applications stream, read frame by frame.
type scaleStream struct {
	resp        *http.Response
	lastID      string
	pendingData bool // events since the last id
	frames      chan scaleEvent
	timeout     <-chan time.Time
}

type scaleEvent struct{ id, event, data string }

// openScaleStream opens the applications stream of base (with query, when
// not "") as token, resuming from lastID when it is not "".
func openScaleStream(ctx context.Context, b testing.TB, base, query, token, lastID string) *scaleStream {
	b.Helper()
	resp := dialScaleStream(ctx, b, base, query, token, lastID)
	s := &scaleStream{resp: resp, lastID: lastID, frames: make(chan scaleEvent, 1024)}
	go func() {
		defer close(s.frames)
		rd := streamtest.NewReader(resp.Body)
		for {
			f, err := rd.Next()
			if err != nil {
				return
			}
			if f.HasID || f.HasData || f.Event != "" {
				s.frames <- scaleEvent{id: f.ID, event: f.Event, data: f.Data}
			}
		}
	}()
	return s
}

// dialScaleStream opens an applications stream and returns its response,
// answered 200.
func dialScaleStream(ctx context.Context, b testing.TB, base, query, token, lastID string) *http.Response {
	b.Helper()
	u := base + "/v1/deploy/stream/applications"
	if query != "" {
		u += "?" + query
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		b.Fatalf("stream from %s: %s", base, resp.Status)
	}
	return resp
}

func (s *scaleStream) next(b testing.TB) scaleEvent {
	b.Helper()
	select {
	case ev, ok := <-s.frames:
		if !ok {
			b.Fatal("the stream ended")
		}
		return ev
	case <-time.After(2 * time.Minute):
		b.Fatal("no frame within 2 minutes")
	}
	return scaleEvent{}
}

func (s *scaleStream) deadline(d time.Duration) { s.timeout = time.After(d) }

func (s *scaleStream) tryNext() (scaleEvent, bool) {
	select {
	case ev, ok := <-s.frames:
		return ev, ok
	case <-s.timeout:
		return scaleEvent{}, false
	}
}

func (s *scaleStream) close() { s.resp.Body.Close() }
