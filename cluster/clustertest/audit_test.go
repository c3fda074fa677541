package clustertest

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestAuditLog: with WithAuditLog, a client's create, patch and delete are
// in the audit log under its user agent as soon as each call returns, its
// reads are not, and the log survives an API server restart.
func TestAuditLog(t *testing.T) {
	t.Parallel()
	began := time.Now()
	c := Start(t, WithAuditLog())
	ctx := t.Context()

	const agent = "audit-probe/7 (clustertest)"
	cfg := rest.CopyConfig(c.Config)
	cfg.UserAgent = agent
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cms := cs.CoreV1().ConfigMaps("default")
	mine := func(t *testing.T) []AuditEvent {
		t.Helper()
		var out []AuditEvent
		for _, e := range c.AuditEvents(t) {
			if e.UserAgent == agent {
				out = append(out, e)
			}
		}
		return out
	}
	event := func(verb string, code int) AuditEvent {
		return AuditEvent{Verb: verb, User: AdminUser, UserAgent: agent, Version: "v1",
			Resource: "configmaps", Namespace: "default", Name: "audited", Code: code}
	}
	noTimes := cmpopts.IgnoreFields(AuditEvent{}, "Received", "Completed")

	t.Run("writes logged, reads not", func(t *testing.T) {
		_, err := cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "audited"},
			Data:       map[string]string{"k": "v1"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if _, err := cms.Get(ctx, "audited", metav1.GetOptions{}); err != nil {
			t.Fatalf("get: %v", err)
		}
		if _, err := cms.Patch(ctx, "audited", types.MergePatchType, []byte(`{"data":{"k":"v2"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch: %v", err)
		}
		got := mine(t)
		want := []AuditEvent{event("create", 201), event("patch", 200)}
		if diff := cmp.Diff(want, got, noTimes); diff != "" {
			t.Fatalf("events with user agent %q (-want +got):\n%s", agent, diff)
		}
		for _, e := range got {
			if e.Received.Before(began.Add(-time.Second)) || e.Completed.Before(e.Received) || e.Completed.After(time.Now().Add(time.Second)) {
				t.Errorf("%s: received %s, completed %s: want both within the test (began %s), in order",
					e.Verb, e.Received, e.Completed, began)
			}
		}
		for _, e := range c.AuditEvents(t) {
			switch e.Verb {
			case "get", "list", "watch":
				t.Errorf("a read in the audit log: %+v", e)
			}
		}
	})

	t.Run("log kept across restart", func(t *testing.T) {
		c.RestartAPIServer(t)
		if err := cms.Delete(ctx, "audited", metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete after restart: %v", err)
		}
		want := []AuditEvent{event("create", 201), event("patch", 200), event("delete", 200)}
		if diff := cmp.Diff(want, mine(t), noTimes); diff != "" {
			t.Errorf("events with user agent %q after a restart (-want +got):\n%s", agent, diff)
		}
	})
}

func TestParseAuditLog(t *testing.T) {
	const log = `{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/configmaps?fieldManager=x","verb":"create","user":{"username":"admin","uid":"admin","groups":["system:masters","system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"probe/1","objectRef":{"resource":"configmaps","namespace":"default","name":"cm","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":201},"requestReceivedTimestamp":"2026-01-02T03:04:05.123456Z","stageTimestamp":"2026-01-02T03:04:05.234567Z"}

{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a2","stage":"ResponseComplete","requestURI":"/apis/apps/v1/namespaces/hanzo/deployments/web/status","verb":"patch","user":{"username":"deployd","groups":["deployd"]},"sourceIPs":["127.0.0.1"],"userAgent":"deployd/2","objectRef":{"resource":"deployments","namespace":"hanzo","name":"web","apiGroup":"apps","apiVersion":"v1","subresource":"status"},"responseStatus":{"metadata":{},"status":"Failure","reason":"Forbidden","code":403},"requestReceivedTimestamp":"2026-01-02T03:04:06.000001Z","stageTimestamp":"2026-01-02T03:04:06.000002Z"}
{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a3","stage":"Resp`
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	got, err := parseAuditLog([]byte(log))
	if err != nil {
		t.Fatal(err)
	}
	want := []AuditEvent{
		{Verb: "create", User: "admin", UserAgent: "probe/1", Version: "v1", Resource: "configmaps",
			Namespace: "default", Name: "cm", Code: 201,
			Received: at("2026-01-02T03:04:05.123456Z"), Completed: at("2026-01-02T03:04:05.234567Z")},
		{Verb: "patch", User: "deployd", UserAgent: "deployd/2", Group: "apps", Version: "v1", Resource: "deployments",
			Subresource: "status", Namespace: "hanzo", Name: "web", Code: 403,
			Received: at("2026-01-02T03:04:06.000001Z"), Completed: at("2026-01-02T03:04:06.000002Z")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}

	for _, partial := range []string{"", `{"verb":"cre`} {
		if got, err := parseAuditLog([]byte(partial)); err != nil || len(got) != 0 {
			t.Errorf("parseAuditLog(%q): got %v, %v; want no events", partial, got, err)
		}
	}
	_, err = parseAuditLog([]byte("{\"verb\":\"create\"}\nnot json\n{\"verb\":\"patch\"}\n"))
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a broken complete line: got %v, want an error naming line 2", err)
	}
}

// fatalTB records a Fatalf and ends the goroutine, as testing.T does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

func TestAuditEventsNeedsOption(t *testing.T) {
	c := &Cluster{Dir: t.TempDir()}
	tb := &fatalTB{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.AuditEvents(tb)
		t.Error("AuditEvents returned on a cluster started without WithAuditLog")
	}()
	<-done
	if !strings.Contains(tb.msg, "WithAuditLog") {
		t.Errorf("failure message %q does not name WithAuditLog", tb.msg)
	}
}
