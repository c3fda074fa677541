package handlers

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
	"github.com/hanzoai/deploy/projection/drift/drifttest"
)

// fakeEngine is the engine as the routes see it: it answers a fixed report
// or error and counts what it was asked.
type fakeEngine struct {
	mu         sync.Mutex
	report     *gitops.ReconcileReport
	err        error
	status     gitops.EngineStatus
	desired    map[string]map[string]any // liveKey → object
	reconciles []bool                    // dryRun of each call
	triggers   []string
	// Leader's answer: leader with notSelf, or leaderErr.
	leader    gitops.EngineLeader
	notSelf   bool
	leaderErr error
	suspended *gitops.EngineSuspension
}

func (f *fakeEngine) Reconcile(_ context.Context, trigger string, dryRun bool) (*gitops.ReconcileReport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if trigger != gitops.TriggerRequest {
		panic("reconcile by request with trigger " + trigger)
	}
	f.reconciles = append(f.reconciles, dryRun)
	return f.report, f.err
}

func (f *fakeEngine) Trigger(trigger string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.triggers = append(f.triggers, trigger)
}

func (f *fakeEngine) Status() gitops.EngineStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *fakeEngine) Desired(kind projection.Kind, ns, name string) (map[string]any, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	obj, ok := f.desired[liveKey(kind, ns, name)]
	return obj, ok
}

// The fake declares no App in git: rollbacks keep the cluster patch path.
func (f *fakeEngine) Manages(string, string) (string, bool) { return "", false }

func (f *fakeEngine) PushEnabled() bool { return false }

func (f *fakeEngine) Instance() string { return "universe" }

func (f *fakeEngine) Leader() (gitops.EngineLeader, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.leader, !f.notSelf, f.leaderErr
}

func (f *fakeEngine) Suspend(_ context.Context, by string) (gitops.EngineStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.suspended == nil {
		f.suspended = &gitops.EngineSuspension{By: by, At: engineStarted}
	}
	st := f.status
	st.Suspended, st.State = f.suspended, gitops.EngineStateSuspended
	return st, nil
}

func (f *fakeEngine) Resume(context.Context) (gitops.EngineStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.suspended = nil
	st := f.status
	st.State = gitops.EngineStateOK
	return st, nil
}

func (f *fakeEngine) WriteTag(context.Context, gitops.TagWrite) (string, error) {
	return "", errors.New("the fake engine declares no App")
}

func (f *fakeEngine) History(context.Context, string, string) ([]gitops.GitCommit, error) {
	return nil, nil
}

func (f *fakeEngine) calls() (reconciles []bool, triggers []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bool(nil), f.reconciles...), append([]string(nil), f.triggers...)
}

var (
	engineStarted  = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	engineFinished = engineStarted.Add(1500 * time.Millisecond)
	engineNext     = engineStarted.Add(3 * time.Minute)
)

// newEngineFake is a fake engine following main of testEngineSource, with
// one run done, whose report has a failure.
func newEngineFake() *fakeEngine {
	return &fakeEngine{
		report: &gitops.ReconcileReport{
			Declared: 3, Failed: 1, Instance: "universe", Synced: 2, Revision: testRevision, Source: testEngineSource,
			Results: []gitops.ReconcileResult{
				{Message: "unchanged", Resource: "hanzo.ai/v1/App/hanzo/gateway", Status: gitops.ResultSynced},
				{Message: "created", Resource: "hanzo.ai/v1/App/hanzo/iam", Status: gitops.ResultSynced},
				{Message: "kind v1/Secret is not on the engine's allow-list", Resource: "/v1/Secret/hanzo/db", Status: gitops.ResultSyncFailed},
			},
		},
		status: gitops.EngineStatus{
			Enabled: true, Source: testEngineSource, Revision: testRevision, Runs: 7,
			LastRun: &gitops.EngineRun{ID: "20261130T120000Z-7", Trigger: gitops.TriggerInterval, StartedAt: engineStarted,
				FinishedAt: engineFinished, Declared: 3, Synced: 2, Failed: 1},
			NextRunAt: &engineNext,
		},
		desired: map[string]map[string]any{},
	}
}

const testRevision = "3f1c9a7e5b2d4c6f8a0e1b3d5f7a9c2e4b6d8f01"

func newEngineEnv(t *testing.T) (*serverEnv, *fakeEngine) {
	t.Helper()
	env := newServerEnv(t)
	f := newEngineFake()
	env.srv.d.Engine = f
	env.srv.d.EngineWebhookSecret = []byte(testWebhookSecret)
	return env, f
}

// TestReconcileAuthz: the SuperAdmin check comes first: anonymous and
// expired callers 401, everyone else but a SuperAdmin 403, and the engine is
// never asked; then a disabled engine is a 503 with its exact reason.
func TestReconcileAuthz(t *testing.T) {
	env, f := newEngineEnv(t)
	want := map[string]int{"superadmin": 200, "acme-member": 403, "globex-orgadmin": 403, "no-org": 403, "anonymous": 401, "expired": 401}
	for _, id := range identities {
		for _, path := range []string{reconcilePath, reconcilePath + "?dryRun=true", reconcilePath + "?dryRun=bogus"} {
			r := env.post(t, path, id.token(env, t), "")
			w := want[id.name]
			if id.name == "superadmin" && strings.HasSuffix(path, "bogus") {
				w = 400
			}
			if r.code != w {
				t.Errorf("%s POST %s: got %d, want %d: %s", id.name, path, r.code, w, r.body)
			}
			if r.code >= 400 {
				errorMessage(t, r)
			}
		}
	}
	if got, _ := f.calls(); len(got) != 2 || got[0] || !got[1] {
		t.Fatalf("the engine ran %v, want [false true] (the SuperAdmin's two valid requests)", got)
	}

	env.srv.d.Engine = nil
	for _, id := range identities {
		r := env.post(t, reconcilePath, id.token(env, t), "")
		w := want[id.name]
		if w == 200 {
			w = 503
		}
		if r.code != w {
			t.Fatalf("disabled, %s: got %d, want %d: %s", id.name, r.code, w, r.body)
		}
		if w == 503 {
			if msg := errorMessage(t, r); msg != "deploy engine disabled (set DEPLOY_ENGINE_ENABLED=true)" {
				t.Fatalf("disabled: got %q", msg)
			}
		}
	}
}

// TestReconcileDryRun: dryRun is true, false or absent; anything else is a
// 400 naming it, and the engine is not asked.
func TestReconcileDryRun(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	for _, tc := range []struct {
		query string
		code  int
		dry   bool
	}{
		{"", 200, false},
		{"?dryRun=false", 200, false},
		{"?dryRun=true", 200, true},
		{"?dryRun=", 400, false},
		{"?dryRun=1", 400, false},
		{"?dryRun=TRUE", 400, false},
		{"?dryRun=true&dryRun=true", 400, false},
		{"?dryrun=true", 400, false},
		{"?prune=true", 400, false},
	} {
		before, _ := f.calls()
		r := env.post(t, reconcilePath+tc.query, root, "")
		after, _ := f.calls()
		if r.code != tc.code {
			t.Errorf("%q: got %d, want %d: %s", tc.query, r.code, tc.code, r.body)
			continue
		}
		if tc.code != 200 {
			if msg := errorMessage(t, r); !strings.Contains(msg, "dryRun") && !strings.Contains(msg, "dryrun") && !strings.Contains(msg, "prune") {
				t.Errorf("%q: message %q names no parameter", tc.query, msg)
			}
			if len(after) != len(before) {
				t.Errorf("%q: the engine ran for a bad request", tc.query)
			}
			continue
		}
		if len(after) != len(before)+1 || after[len(after)-1] != tc.dry {
			t.Errorf("%q: engine calls %v, want one more with dryRun=%v", tc.query, after, tc.dry)
		}
	}
	// A body other than {} or nothing is refused.
	if r := env.post(t, reconcilePath, root, "not json"); r.code != 400 {
		t.Fatalf("a non-JSON body: got %d", r.code)
	}
}

// TestReconcileReport: the report is answered as it is, keys sorted,
// 200 also with failures; results [] when there are none.
func TestReconcileReport(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	r := env.post(t, reconcilePath, root, "{}")
	if r.code != 200 {
		t.Fatalf("got %d: %s", r.code, r.body)
	}
	golden(t, "reconcile.json", []byte(r.body))
	keys := []string{`"declared"`, `"failed"`, `"instance"`, `"prune"`, `"pruned"`, `"results"`, `"revision"`, `"source"`, `"synced"`}
	at := -1
	for _, k := range keys {
		i := strings.Index(r.body, k)
		if i <= at {
			t.Fatalf("key %s is not after the one before it in %s", k, r.body)
		}
		at = i
	}
	if !strings.HasPrefix(r.body, `{"declared":3,"failed":1,"instance":"universe","prune":false,"pruned":0,"results":[{"message":"unchanged","resource":"hanzo.ai/v1/App/hanzo/gateway","status":"Synced"}`) {
		t.Fatalf("report body: %s", r.body)
	}

	f.mu.Lock()
	f.report = &gitops.ReconcileReport{Instance: "universe", Revision: testRevision, Source: testEngineSource}
	f.mu.Unlock()
	if r := env.post(t, reconcilePath+"?dryRun=true", root, ""); r.code != 200 || !strings.Contains(r.body, `"results":[]`) {
		t.Fatalf("an empty report: %d %s", r.code, r.body)
	}
	if f.report.Results != nil {
		t.Fatal("the handler changed the engine's report")
	}
	logs := env.logs.String()
	if !hasAuditLine(logs, reconcilePath) || !strings.Contains(logs, "reconcile dryRun=true revision="+testRevision+" declared=0") {
		t.Fatalf("no audit line for the reconcile:\n%s", logs)
	}
}

// TestReconcileError: a run that could not complete is a 502 with the
// engine's safe reason; no report at all is a 502 too.
func TestReconcileError(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	f.err = errors.New(`render: infra/k8s/operator/crs/hanzo/iam.yaml line 7: mapping values are not allowed in this context`)
	r := env.post(t, reconcilePath, root, "")
	if r.code != http.StatusBadGateway || errorMessage(t, r) != f.err.Error() {
		t.Fatalf("got %d %s, want 502 with the engine's reason", r.code, r.body)
	}
	f.mu.Lock()
	f.err, f.report = nil, nil
	f.mu.Unlock()
	r = env.post(t, reconcilePath, root, "")
	if r.code != http.StatusBadGateway || errorMessage(t, r) != "the engine answered no report" {
		t.Fatalf("no report: got %d %s", r.code, r.body)
	}
}

// TestGitopsEngineStatus: GET /v1/deploy/gitops reports the engine's state
// (golden); disabled, the configured source with nothing run (the golden
// gitops.json of TestWireShapes).
func TestGitopsEngineStatus(t *testing.T) {
	env, _ := newEngineEnv(t)
	r := env.get(t, "/v1/deploy/gitops", env.token(t, userRoot, time.Hour))
	if r.code != 200 {
		t.Fatalf("got %d: %s", r.code, r.body)
	}
	golden(t, "gitops.engine.json", []byte(r.body))
	decodeStrict(t, r.body, &gitopsWire{})
}

// TestResourceDesiredFromGit: for an object the engine manages, the
// desired side is the engine's rendering (desiredSource "git"), compared
// with live under the same normalisation; other objects keep theirs.
func TestResourceDesiredFromGit(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	const path = "/v1/deploy/gateway/resource/hanzo.ai:App:hanzo:gateway?namespace=hanzo"
	if r := env.get(t, path, root); r.code != 200 || !strings.Contains(r.body, `"desiredSource":"none"`) {
		t.Fatalf("before the engine declares it: %d %s", r.code, r.body)
	}
	// git declares v2.1.0; the cluster still runs v2.0.0.
	f.desired[liveKey(projection.KindApp, "hanzo", "gateway")] = map[string]any{
		"apiVersion": "hanzo.ai/v1", "kind": "App",
		"metadata": map[string]any{"name": "gateway", "namespace": "hanzo",
			"labels": map[string]any{"app.kubernetes.io/part-of": "platform", projection.LabelEngineInstance: "universe"}},
		"spec": map[string]any{"image": map[string]any{"repository": "ghcr.io/hanzoai/gateway", "tag": "v2.1.0"}, "replicas": int64(1), "role": "web"},
	}
	r := env.get(t, path, root)
	if r.code != 200 {
		t.Fatalf("got %d: %s", r.code, r.body)
	}
	golden(t, "resource.gateway-app.git.json", []byte(r.body))
	var ans resourceWire
	decodeStrict(t, r.body, &ans)
	if ans.DesiredSource != "git" || !ans.Diff.Modified || len(ans.Diff.Patch) != 1 ||
		ans.Diff.Patch[0]["path"] != "/spec/image/tag" || ans.Diff.Patch[0]["value"] != "v2.1.0" {
		t.Fatalf("diff: %+v", ans)
	}
	// Other objects of the app keep the last-applied comparison.
	if r := env.get(t, "/v1/deploy/gateway/resource/apps:Deployment:hanzo:gateway?namespace=hanzo", root); r.code != 200 || !strings.Contains(r.body, `"desiredSource":"none"`) {
		t.Fatalf("the Deployment: %d %s", r.code, r.body)
	}
}

const testWebhookSecret = "It's a Secret to Everybody"

func githubSignature(body string) string { return "sha256=" + giteaSignature(body) }

func giteaSignature(body string) string {
	mac := hmac.New(sha256.New, []byte(testWebhookSecret))
	mac.Write([]byte(body))
	return hex.EncodeToString(mac.Sum(nil))
}

// TestGitWebhook: a signed push to the engine's ref queues exactly one run;
// anything unsigned or wrongly signed is 401 and starts nothing; other refs
// and other events are accepted and ignored.
func TestGitWebhook(t *testing.T) {
	push := `{"ref":"refs/heads/main","before":"0000","after":"` + testRevision + `","commits":[]}`
	other := `{"ref":"refs/heads/dev","after":"` + testRevision + `"}`
	for _, tc := range []struct {
		name    string
		body    string
		header  []string
		code    int
		trigger bool
		answer  string // a part of the body
	}{
		{"github push", push, []string{"X-GitHub-Event", "push", "X-Hub-Signature-256", githubSignature(push)}, 202, true, `"queued":true`},
		{"gitea push", push, []string{"X-Gitea-Event", "push", "X-Gitea-Signature", giteaSignature(push)}, 202, true, `"queued":true`},
		{"gitea with both headers", push, []string{"X-Gitea-Event", "push", "X-GitHub-Event", "push", "X-Gitea-Signature", giteaSignature(push), "X-Hub-Signature-256", githubSignature(push)}, 202, true, `"ref":"refs/heads/main"`},
		{"upper-case hex", push, []string{"X-GitHub-Event", "push", "X-Hub-Signature-256", "sha256=" + strings.ToUpper(giteaSignature(push))}, 202, true, `"queued":true`},
		{"no event header", push, []string{"X-Hub-Signature-256", githubSignature(push)}, 202, true, `"event":"push"`},
		{"github wrong signature", push, []string{"X-GitHub-Event", "push", "X-Hub-Signature-256", githubSignature(other)}, 401, false, ""},
		{"gitea wrong signature", push, []string{"X-Gitea-Event", "push", "X-Gitea-Signature", giteaSignature(other)}, 401, false, ""},
		{"one good one bad", push, []string{"X-Gitea-Signature", giteaSignature(push), "X-Hub-Signature-256", githubSignature(other)}, 401, false, ""},
		{"missing signature", push, []string{"X-GitHub-Event", "push"}, 401, false, ""},
		{"sha1 signature only", push, []string{"X-GitHub-Event", "push", "X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567"}, 401, false, ""},
		{"github signature without prefix", push, []string{"X-Hub-Signature-256", giteaSignature(push)}, 401, false, ""},
		{"gitea signature with prefix", push, []string{"X-Gitea-Signature", githubSignature(push)}, 401, false, ""},
		{"empty signature", push, []string{"X-Hub-Signature-256", ""}, 401, false, ""},
		{"signature of another secret", push, []string{"X-Hub-Signature-256", "sha256=" + hex.EncodeToString(hmac.New(sha256.New, []byte("guess")).Sum(nil))}, 401, false, ""},
		{"another ref", other, []string{"X-GitHub-Event", "push", "X-Hub-Signature-256", githubSignature(other)}, 202, false, `"ignored":"the push is to \"refs/heads/dev\"; the engine follows \"main\""`},
		{"a tag", `{"ref":"refs/tags/v1.0.0"}`, []string{"X-Hub-Signature-256", githubSignature(`{"ref":"refs/tags/v1.0.0"}`)}, 202, false, `"queued":false`},
		{"branch deleted", `{"ref":"refs/heads/main","deleted":true}`, []string{"X-Hub-Signature-256", githubSignature(`{"ref":"refs/heads/main","deleted":true}`)}, 202, false, `"ignored":"the push deleted \"refs/heads/main\""`},
		{"ping", `{"zen":"Keep it logically awesome.","hook_id":1}`, []string{"X-GitHub-Event", "ping", "X-Hub-Signature-256", githubSignature(`{"zen":"Keep it logically awesome.","hook_id":1}`)}, 202, false, `"event":"ping"`},
		{"gitea create", push, []string{"X-Gitea-Event", "create", "X-Gitea-Signature", giteaSignature(push)}, 202, false, `"queued":false`},
		{"unsigned ping", `{"zen":"x"}`, []string{"X-GitHub-Event", "ping"}, 401, false, ""},
		{"malformed JSON", `{"ref":`, []string{"X-Hub-Signature-256", githubSignature(`{"ref":`)}, 400, false, ""},
		{"form-encoded", "payload=%7B%7D", []string{"X-Hub-Signature-256", githubSignature("payload=%7B%7D")}, 400, false, ""},
		{"no ref", `{"after":"x"}`, []string{"X-Hub-Signature-256", githubSignature(`{"after":"x"}`)}, 400, false, ""},
		{"not an object", `["refs/heads/main"]`, []string{"X-Hub-Signature-256", githubSignature(`["refs/heads/main"]`)}, 400, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, f := newEngineEnv(t)
			r := env.post(t, webhookPath, "", tc.body, tc.header...)
			if r.code != tc.code {
				t.Fatalf("got %d, want %d: %s", r.code, tc.code, r.body)
			}
			if r.code >= 400 {
				errorMessage(t, r)
			} else if !strings.Contains(r.body, tc.answer) {
				t.Fatalf("answer %s lacks %s", r.body, tc.answer)
			}
			reconciles, triggers := f.calls()
			if len(reconciles) != 0 {
				t.Fatalf("the webhook ran the engine synchronously: %v", reconciles)
			}
			want := 0
			if tc.trigger {
				want = 1
			}
			if len(triggers) != want || (want == 1 && triggers[0] != gitops.TriggerWebhook) {
				t.Fatalf("triggers %v, want %d of %q", triggers, want, gitops.TriggerWebhook)
			}
			if !hasAuditLine(env.logs.String(), webhookPath) {
				t.Fatal("no audit line for the webhook")
			}
		})
	}
}

// TestGitWebhookRefused: disabled, unconfigured and oversized deliveries
// start nothing.
func TestGitWebhookRefused(t *testing.T) {
	push := `{"ref":"refs/heads/main"}`
	sig := []string{"X-GitHub-Event", "push", "X-Hub-Signature-256", githubSignature(push)}

	env, f := newEngineEnv(t)
	env.srv.d.Engine = nil
	r := env.post(t, webhookPath, "", push, sig...)
	if r.code != 503 || errorMessage(t, r) != engineDisabled {
		t.Fatalf("disabled: %d %s", r.code, r.body)
	}
	env.srv.d.Engine = f
	env.srv.d.EngineWebhookSecret = nil
	r = env.post(t, webhookPath, "", push, sig...)
	if r.code != 503 || !strings.Contains(errorMessage(t, r), "DEPLOY_ENGINE_WEBHOOK_SECRET") {
		t.Fatalf("no secret: %d %s", r.code, r.body)
	}
	// An empty secret verifies nothing, not even an HMAC keyed with it.
	mac := hmac.New(sha256.New, nil)
	mac.Write([]byte(push))
	if err := verifyWebhook(nil, http.Header{"X-Gitea-Signature": {hex.EncodeToString(mac.Sum(nil))}}, []byte(push)); err == nil {
		t.Fatal("an empty secret verified a delivery")
	}
	env.srv.d.EngineWebhookSecret = []byte(testWebhookSecret)
	big := `{"ref":"refs/heads/main","pad":"` + strings.Repeat("x", webhookBodyLimit) + `"}`
	r = env.post(t, webhookPath, "", big, "X-Hub-Signature-256", githubSignature(big))
	if r.code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized: %d %s", r.code, r.body)
	}
	errorMessage(t, r)
	// Under the webhook's limit but over the other routes' 64 KiB: accepted.
	mid := `{"ref":"refs/heads/main","pad":"` + strings.Repeat("x", 100<<10) + `"}`
	if r := env.post(t, webhookPath, "", mid, "X-Hub-Signature-256", githubSignature(mid)); r.code != 202 {
		t.Fatalf("a 100 KiB push: %d %s", r.code, r.body)
	}
	if _, triggers := f.calls(); len(triggers) != 1 {
		t.Fatalf("triggers %v, want the one of the 100 KiB push", triggers)
	}
}

// hasAuditLine reports whether the log holds an audit line for route.
func hasAuditLine(logs, route string) bool {
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, "msg=audit") && strings.Contains(line, "route="+route+" ") {
			return true
		}
	}
	return false
}

// TestStreamManagedApp: the stream shows a managed App's git revision and
// the run that last applied it, and a new run's marks as a MODIFIED.
func TestStreamManagedApp(t *testing.T) {
	env := newServerEnv(t)
	hub := withHub(t, env)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+"/v1/deploy/stream/applications?name=gateway", nil)
	req.Header.Set("Authorization", "Bearer "+env.token(t, userRoot, time.Hour))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	next := func() string {
		t.Helper()
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") {
				return strings.TrimPrefix(line, "data: ")
			}
		}
		t.Fatalf("the stream ended: %v", sc.Err())
		return ""
	}
	added := next()
	if !strings.HasPrefix(added, `{"result":{"type":"ADDED"`) || !strings.Contains(added, `"sync":{"status":"Synced","revision":"`+testRevision+`"}`) ||
		!strings.Contains(added, `"message":"engine run 20261120T135955Z-42 applied revision `+testRevision+`"`) {
		t.Fatalf("ADDED: %s", added)
	}
	// The engine's next run changes the App's desired state.
	gw := env.live.objs[liveKey(projection.KindApp, "hanzo", "gateway")]
	md := maps.Clone(gw["metadata"].(map[string]any))
	md["resourceVersion"] = "2011"
	md["annotations"] = map[string]any{
		projection.AnnotationEngineRevision:  "fedcba9876543210fedcba9876543210fedcba98",
		projection.AnnotationEngineRun:       "20261130T120000Z-43",
		projection.AnnotationEngineAppliedAt: "2026-11-30T12:00:01Z",
	}
	changed := maps.Clone(gw)
	changed["metadata"] = md
	o, err := projection.Decode(changed)
	if err != nil {
		t.Fatal(err)
	}
	deltas, err := env.store.Apply(projection.Change{Op: projection.Upsert, Object: o})
	if err != nil {
		t.Fatal(err)
	}
	hub.Publish(deltas)
	modified := next()
	if !strings.HasPrefix(modified, `{"result":{"type":"MODIFIED"`) || !strings.Contains(modified, `"revision":"fedcba9876543210fedcba9876543210fedcba98"}`) ||
		!strings.Contains(modified, `"message":"engine run 20261130T120000Z-43 applied revision fedcba9876543210fedcba9876543210fedcba98"`) {
		t.Fatalf("MODIFIED: %s", modified)
	}
}

// TestDriftPairsModified: each drift pair through the routes — the desired
// side from the engine (managed-resources) and from the last-applied
// configuration (the native resource route) — is modified exactly when it
// drifted, as the engine decides (engine's TestDriftPairs).
func TestDriftPairsModified(t *testing.T) {
	env, f := newEngineEnv(t)
	root := env.token(t, userRoot, time.Hour)
	key := liveKey(projection.KindApp, drifttest.Namespace, drifttest.Name)
	orig := env.live.objs[key]
	t.Cleanup(func() { env.live.objs[key] = orig })
	for _, p := range drifttest.Pairs() {
		env.live.objs[key] = p.Live
		f.mu.Lock()
		f.desired[key] = p.Desired
		f.mu.Unlock()
		r := env.get(t, "/api/v1/applications/gateway/managed-resources?kind=App", root)
		var ans uiManagedResourcesResponse
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &ans) != nil || len(ans.Items) != 1 {
			t.Fatalf("%s: managed-resources: %d %s", p.Name, r.code, r.body)
		}
		if ans.Items[0].Modified != p.Drifted {
			t.Errorf("%s: managed-resources modified %v, want %v", p.Name, ans.Items[0].Modified, p.Drifted)
		}

		f.mu.Lock()
		delete(f.desired, key)
		f.mu.Unlock()
		applied, _ := json.Marshal(p.Desired)
		live := p.Live
		md := live["metadata"].(map[string]any)
		ann, _ := md["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
			md["annotations"] = ann
		}
		ann[projection.AnnotationLastApplied] = string(applied)
		r = env.get(t, "/v1/deploy/gateway/resource/hanzo.ai:App:hanzo:gateway?namespace=hanzo", root)
		var res resourceWire
		if r.code != http.StatusOK || json.Unmarshal([]byte(r.body), &res) != nil || res.DesiredSource != "last-applied" {
			t.Fatalf("%s: the resource route: %d %s", p.Name, r.code, r.body)
		}
		if res.Diff.Modified != p.Drifted {
			t.Errorf("%s: the resource route's modified %v, want %v", p.Name, res.Diff.Modified, p.Drifted)
		}
	}
}
