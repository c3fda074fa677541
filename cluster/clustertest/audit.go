package clustertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// auditPolicy records every write (create, update, patch, delete,
// deletecollection) at level Metadata once its response is complete, and
// nothing else.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted, Panic]
rules:
- level: Metadata
  verbs: [create, update, patch, delete, deletecollection]
- level: None
`

// WithAuditLog has kube-apiserver write an audit log of every write
// request (see AuditEvents); reads and watches are not logged.
func WithAuditLog() Option { return func(o *options) { o.auditLog = true } }

// AuditEvent is one write request as the API server's audit log records it.
type AuditEvent struct {
	// Verb is the request's verb: create, update, patch, delete or
	// deletecollection.
	Verb string
	// User is the authenticated user's name (user.username); UserAgent is
	// the request's User-Agent header (rest.Config.UserAgent for client-go).
	User, UserAgent string
	// Group ("" for the core group), Version, Resource, Subresource,
	// Namespace and Name are the object the request was for (objectRef).
	Group, Version, Resource, Subresource, Namespace, Name string
	// Code is the HTTP status code of the response.
	Code int
	// Received is when the request arrived; Completed is when its
	// response was complete.
	Received, Completed time.Time
}

// auditArgs writes the audit policy into dir and returns the
// kube-apiserver flags that log to dir/audit.log.
func auditArgs(dir string) ([]string, error) {
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		return nil, fmt.Errorf("audit policy: %w", err)
	}
	return []string{
		"--audit-policy-file=" + policy,
		"--audit-log-path=" + filepath.Join(dir, "audit.log"),
		"--audit-log-format=json",
		// Each event is written before the response is sent, so a test
		// sees a write in the log as soon as the call returns.
		"--audit-log-mode=blocking",
		// No rotation: the log is one file for the cluster's lifetime.
		"--audit-log-maxsize=0",
	}, nil
}

// AuditEvents reads the audit log written so far, in the order the API
// server wrote it: one event per completed write request, by any client
// (the API server's own bootstrap writes and the harness's CRD installs
// included). A write's event is written before its response is sent, and
// the log is kept across RestartAPIServer. It fails the test if the cluster
// was started without WithAuditLog.
func (c *Cluster) AuditEvents(t testing.TB) []AuditEvent {
	t.Helper()
	if !c.opts.auditLog {
		t.Fatalf("AuditEvents: the cluster was started without WithAuditLog")
	}
	path := filepath.Join(c.Dir, "audit.log")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("AuditEvents: %v", err)
	}
	events, err := parseAuditLog(data)
	if err != nil {
		t.Fatalf("AuditEvents: %s: %v", path, err)
	}
	return events
}

// auditLine is the part of an audit.k8s.io/v1 Event that AuditEvent keeps.
type auditLine struct {
	Verb string `json:"verb"`
	User struct {
		Username string `json:"username"`
	} `json:"user"`
	UserAgent string `json:"userAgent"`
	ObjectRef *struct {
		APIGroup    string `json:"apiGroup"`
		APIVersion  string `json:"apiVersion"`
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
	StageTimestamp           time.Time `json:"stageTimestamp"`
}

// parseAuditLog parses a JSON-lines audit log. A last line without its
// newline is one the API server is still writing, and is left out.
func parseAuditLog(data []byte) ([]AuditEvent, error) {
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		data = data[:i+1]
	} else {
		data = nil
	}
	var events []AuditEvent
	for n := 1; len(data) > 0; n++ {
		line, rest, _ := bytes.Cut(data, []byte{'\n'})
		data = rest
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var l auditLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		e := AuditEvent{
			Verb:      l.Verb,
			User:      l.User.Username,
			UserAgent: l.UserAgent,
			Received:  l.RequestReceivedTimestamp,
			Completed: l.StageTimestamp,
		}
		if r := l.ObjectRef; r != nil {
			e.Group, e.Version, e.Resource, e.Subresource, e.Namespace, e.Name =
				r.APIGroup, r.APIVersion, r.Resource, r.Subresource, r.Namespace, r.Name
		}
		if l.ResponseStatus != nil {
			e.Code = l.ResponseStatus.Code
		}
		events = append(events, e)
	}
	return events, nil
}
