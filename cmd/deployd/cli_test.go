package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPrintLineDiff(t *testing.T) {
	for _, c := range []struct{ a, b, want string }{
		{"x\ny\nz", "x\ny\nz", "  x\n  y\n  z\n"},
		{"x\ny\nz", "x\nY\nz", "  x\n- y\n+ Y\n  z\n"},
		{"x\nz", "x\ny\nz", "  x\n+ y\n  z\n"},
		{"x\ny\nz", "y", "- x\n  y\n- z\n"},
	} {
		var b bytes.Buffer
		printLineDiff(&b, strings.Split(c.a, "\n"), strings.Split(c.b, "\n"))
		if b.String() != c.want {
			t.Errorf("diff of %q and %q:\n%s\nwant:\n%s", c.a, c.b, b.String(), c.want)
		}
	}
}

func TestExitCodes(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{flag.ErrHelp, 0},
		{failed("refused"), 1},
		{errors.New("usage"), 2},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("exitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

func TestShortCommit(t *testing.T) {
	for in, want := range map[string]string{
		"6f1d8e6955f2ab7644800da04e442363c30a0d2b": "6f1d8e6",
		"v2.5.0": "v2.5.0",
		"6F1D8E6955F2AB7644800DA04E442363C30A0D2B": "6F1D8E6955F2AB7644800DA04E442363C30A0D2B",
		"": "",
	} {
		if got := shortCommit(in); got != want {
			t.Errorf("shortCommit(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestEngineCommands: engine status prints the engine of GET
// /v1/deploy/gitops (not the route's whole body, which also lists the CD
// Applications), and --cluster names the cluster whose engine each
// command means.
func TestEngineCommands(t *testing.T) {
	var asked []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Method+" "+r.URL.RequestURI())
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/deploy/gitops":
			_, _ = io.WriteString(w, `{"installed":false,"applications":[],"engine":{"cluster":"staging","enabled":true,"state":"ok",`+
				`"source":{"repo":"https://git.example.com/fleet.git","ref":"main","path":"staging"},"revision":"abc","runs":3,`+
				`"lastRun":{"id":"r3","trigger":"interval","startedAt":"2026-12-01T10:00:00Z","finishedAt":"2026-12-01T10:00:01Z","declared":4,"synced":3,"failed":1,"pruned":0,"error":"staging/broken.yaml: line 3: did not parse"},"nextRunAt":null}}`)
		case "/v1/deploy/reconcile":
			_, _ = io.WriteString(w, `{"cluster":"staging","declared":2,"failed":0,"instance":"universe","prune":true,"pruned":1,"results":[],"revision":"abc","source":{"repo":"r","ref":"main","path":"staging"},"synced":2}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	cli := func(args ...string) string {
		t.Helper()
		var out, errb bytes.Buffer
		if err := run(t.Context(), append(args, "--server", srv.URL, "--token", "t"), &out, &errb); err != nil {
			t.Fatalf("%v: %v: %s", args, err, errb.String())
		}
		return out.String()
	}
	out := cli("engine", "status", "--cluster", "staging")
	for _, want := range []string{"Cluster:   staging", "State:     ok", "staging/broken.yaml", "3 synced, 1 failed"} {
		if !strings.Contains(out, want) {
			t.Errorf("engine status lacks %q:\n%s", want, out)
		}
	}
	if out := cli("engine", "status", "-o", "json"); !strings.HasPrefix(strings.TrimSpace(out), `{`) || strings.Contains(out, "applications") || !strings.Contains(out, `"cluster": "staging"`) {
		t.Errorf("engine status -o json is not the engine:\n%s", out)
	}
	if out := cli("engine", "reconcile", "--dry-run", "--cluster", "staging"); !strings.Contains(out, "cluster staging, revision abc: 2 declared, 2 synced, 0 failed, 1 pruned") {
		t.Errorf("engine reconcile:\n%s", out)
	}
	want := []string{"GET /v1/deploy/gitops?cluster=staging", "GET /v1/deploy/gitops", "POST /v1/deploy/reconcile?cluster=staging&dryRun=true"}
	if fmt.Sprint(asked) != fmt.Sprint(want) {
		t.Errorf("asked %v, want %v", asked, want)
	}
}
