package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/gitops"
	"sigs.k8s.io/yaml"
)

// The terminal's commands over deployd's HTTP API (the one the page and
// the stock Argo CD UI use): deployd app … and deployd engine …. Exit codes:
// 0 success, 1 refused or failed (the server's message), 2 usage.

// exitError carries a command's exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// failed is an exit-1 error: the server refused, or the request failed.
func failed(format string, a ...any) error {
	return &exitError{code: 1, err: fmt.Errorf(format, a...)}
}

// exitCode is the process's exit code for a command's error: 0 for -h
// (the usage was printed), 1 for a refusal or a failure, else 2.
func exitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 2
}

// apiClient calls one deployd server with a bearer token.
type apiClient struct {
	server string
	token  string
	http   *http.Client
}

// clientFlags are the flags every API command takes.
type clientFlags struct {
	server, token, output *string
	insecureHTTP          *bool
}

func addClientFlags(fs *flag.FlagSet) clientFlags {
	return clientFlags{
		server:       fs.String("server", os.Getenv("DEPLOYD_SERVER"), "deployd server URL, e.g. http://127.0.0.1:8080 (env DEPLOYD_SERVER)"),
		token:        fs.String("token", os.Getenv("DEPLOYD_TOKEN"), "bearer token (env DEPLOYD_TOKEN)"),
		output:       fs.String("o", "table", "output: table, wide, json or yaml"),
		insecureHTTP: addInsecureHTTPFlag(fs),
	}
}

// addInsecureHTTPFlag adds --insecure-http, which every command that
// sends or receives a token takes.
func addInsecureHTTPFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("insecure-http", false, "allow an http:// --server that is not loopback (localhost, 127.0.0.0/8, ::1): tokens then cross the network in cleartext")
}

// refuseCleartext is the error for a server URL over which a token would
// cross the network in cleartext: http:// to a host that is not a
// loopback name or address (localhost, 127.0.0.0/8, ::1), unless insecure
// (--insecure-http) allows it. It is nil for https:// and for loopback.
func refuseCleartext(server string, insecure bool) error {
	u, err := url.Parse(server)
	if err != nil || insecure || u.Scheme != "http" || auth.IsLoopbackHost(u.Hostname()) {
		return nil
	}
	return fmt.Errorf("--server %s is plain http to a host that is not loopback, where a token crosses the network in cleartext: use https://, or pass --insecure-http to send the token in cleartext", server)
}

// serverOf is the server a command talks to: named (by --server or
// DEPLOYD_SERVER), else the server of the last deployd login.
func serverOf(named string) string {
	server := strings.TrimSpace(named)
	if server == "" {
		if creds, err := loadCredentials(); err == nil {
			server = creds.Current
		}
	}
	return server
}

// client is the API client of the flags: the server of --server, else
// DEPLOYD_SERVER, else the last one signed in to; the token of --token,
// else DEPLOYD_TOKEN, else the sign-in `deployd login` kept for the
// server (refreshed when it has expired). A plain http server that is
// not loopback is refused without --insecure-http, before any request.
func (f clientFlags) client(ctx context.Context) (*apiClient, error) {
	switch *f.output {
	case "table", "wide", "json", "yaml":
	default:
		return nil, fmt.Errorf("-o must be table, wide, json or yaml, not %q", *f.output)
	}
	c, err := newAPIClient(serverOf(*f.server), *f.token)
	if err != nil {
		return nil, err
	}
	if err := refuseCleartext(c.server, *f.insecureHTTP); err != nil {
		return nil, err
	}
	if c.token == "" {
		if c.token, err = storedToken(ctx, c.server, c.http); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// newAPIClient checks a server URL and returns a client of it.
func newAPIClient(server, token string) (*apiClient, error) {
	u, err := url.Parse(strings.TrimSuffix(server, "/"))
	if server == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--server must be deployd's URL, e.g. --server http://127.0.0.1:8080 (or set DEPLOYD_SERVER, or run deployd login --server URL once)")
	}
	return &apiClient{server: u.String(), token: token, http: &http.Client{Timeout: 60 * time.Second}}, nil
}

// call sends a request and decodes a 2xx answer's JSON into out (when not
// nil); any other answer is a failed error with the server's message.
func (c *apiClient) call(ctx context.Context, method, path string, body any, out any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.server+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, failed("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, failed("%s %s: %v", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, c.refused(resp.StatusCode, bytes.NewReader(b))
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return nil, failed("%s %s: the answer is not the JSON expected: %v", method, path, err)
		}
	}
	return b, nil
}

// refused is the failed error of an answer that is not a success: the
// server's message, and for a 401 what to do about the sign-in.
func (c *apiClient) refused(code int, body io.Reader) error {
	msg := strings.TrimPrefix(serverMessage(body), ": ")
	if msg == "" {
		msg = http.StatusText(code)
	}
	if code == http.StatusUnauthorized {
		if c.token == "" {
			return failed("%s (HTTP 401): not signed in: run deployd login --server %s, or pass a token with --token or DEPLOYD_TOKEN", msg, c.server)
		}
		return failed("%s (HTTP 401): the token is not accepted: sign in again with deployd login --server %s, or pass another with --token", msg, c.server)
	}
	return failed("%s (HTTP %d)", msg, code)
}

// printRaw writes an answer as JSON (indented) or YAML.
func printRaw(w io.Writer, format string, raw []byte) error {
	if format == "yaml" {
		y, err := yaml.JSONToYAML(raw)
		if err != nil {
			return err
		}
		_, err = w.Write(y)
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(w)
	return err
}

// cliApp is the part of an Argo CD Application the tables show.
type cliApp struct {
	Metadata struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Project string `json:"project"`
		Source  struct {
			RepoURL string `json:"repoURL"`
			Path    string `json:"path"`
		} `json:"source"`
		Destination struct {
			Server    string `json:"server"`
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"destination"`
	} `json:"spec"`
	Status struct {
		Sync struct {
			Status   string `json:"status"`
			Revision string `json:"revision"`
		} `json:"sync"`
		Health struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"health"`
		Summary struct {
			Images []string `json:"images"`
		} `json:"summary"`
		History []struct {
			ID              int64  `json:"id"`
			Revision        string `json:"revision"`
			DeployedAt      string `json:"deployedAt"`
			DeployStartedAt string `json:"deployStartedAt"`
			InitiatedBy     struct {
				Username  string `json:"username"`
				Automated bool   `json:"automated"`
			} `json:"initiatedBy"`
		} `json:"history"`
	} `json:"status"`
}

const appUsage = `usage: deployd app <command> [flags]

commands:
  list                  the applications you may see
  get NAME              one application
  history NAME          its releases, newest first
  sync NAME             ask the operator to reconcile it now (SuperAdmin)
  rollback NAME --revision TAG|ID   roll it back to a release (SuperAdmin)
  restart NAME          a rolling restart of its Deployment (SuperAdmin)
  diff NAME             how its live objects differ from what it declares
  logs NAME [-f] [--tail N]   its newest pod's log
  wait NAME [--health] [--sync] [--timeout 5m]   until it is healthy and synced
                        (exit 0), or say its last state (exit 1)

Every command takes --server (env DEPLOYD_SERVER; default: the server of
the last deployd login), --token (env DEPLOYD_TOKEN; default: the sign-in
deployd login kept), --insecure-http (allow an http:// server that is not
loopback, the token sent in cleartext) and -o table|wide|json|yaml.
Run "deployd app <command> -h".

example:
  deployd login --server http://127.0.0.1:8080
  deployd app list -l hanzo.ai/env=main
  deployd app rollback iam --app-namespace hanzo --revision v1.4.2
`

// subcommand splits a group's command from its flags; without one, or
// with -h, it prints the group's usage (an error without one).
func subcommand(group, usage string, args []string, stdout io.Writer) (string, []string, error) {
	if len(args) > 0 && args[0] != "-h" && args[0] != "--help" && args[0] != "help" {
		return args[0], args[1:], nil
	}
	fmt.Fprint(stdout, usage)
	if len(args) == 0 {
		return "", nil, fmt.Errorf("%s: name a command", group)
	}
	return "", nil, nil
}

func runApp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("app", appUsage, args, stdout)
	if sub == "" {
		return err
	}
	fs := flag.NewFlagSet("app "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	ns := fs.String("app-namespace", "", "the application's namespace, when its name is not unique")
	var project, selector, revision, clusterName *string
	var follow, health, synced *bool
	var tail *int
	var timeout *time.Duration
	example := map[string]string{
		"list":     "deployd app list --project default -l hanzo.ai/org=acme --cluster staging -o wide",
		"get":      "deployd app get iam --app-namespace hanzo -o yaml",
		"history":  "deployd app history iam",
		"sync":     "deployd app sync iam --app-namespace hanzo",
		"rollback": "deployd app rollback iam --revision v1.4.2   (or --revision 7, a history id)",
		"restart":  "deployd app restart iam",
		"logs":     "deployd app logs iam -f --tail 50",
		"diff":     "deployd app diff iam --app-namespace hanzo",
		"wait":     "deployd app sync iam && deployd app wait iam --health --sync --timeout 5m",
	}[sub]
	if example == "" {
		return fmt.Errorf("app: unknown command %q\n%s", sub, appUsage)
	}
	switch sub {
	case "list":
		project = fs.String("project", "", "only these projects (comma-separated)")
		selector = fs.String("l", "", "label selector, e.g. hanzo.ai/env=main")
		clusterName = fs.String("cluster", "", "only the applications of this cluster (its name, as GET /api/v1/clusters lists it, or its server URL)")
	case "rollback":
		revision = fs.String("revision", "", "the release to roll back to: its tag (vX.Y.Z) or its history id")
	case "logs":
		follow, tail = fs.Bool("f", false, "follow the log"), fs.Int("tail", 100, "the last lines to show (1 to 5000)")
	case "wait":
		health, synced = fs.Bool("health", false, "until Healthy"), fs.Bool("sync", false, "until Synced (neither flag: both)")
		timeout = fs.Duration("timeout", 5*time.Minute, "give up after this long")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: deployd app %s [flags]\n\nexample:\n  %s\n\nflags:\n", sub, example)
		fs.PrintDefaults()
	}
	// Flags may come before or after the name.
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if name == "" && fs.NArg() > 0 {
		name = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return fmt.Errorf("app %s: unexpected argument %q", sub, fs.Arg(0))
	}
	if (sub == "list") != (name == "") {
		if sub == "list" {
			return fmt.Errorf("app list takes no name; filter with --project, -l and --cluster")
		}
		return fmt.Errorf("app %s: name the application, e.g. %s", sub, example)
	}
	c, err := cf.client(ctx)
	if err != nil {
		return err
	}
	out := *cf.output
	appPath := "/api/v1/applications/" + url.PathEscape(name)
	q := url.Values{}
	if *ns != "" {
		q.Set("appNamespace", *ns)
	}
	withQuery := func(p string) string {
		if len(q) == 0 {
			return p
		}
		return p + "?" + q.Encode()
	}
	switch sub {
	case "list":
		if *project != "" {
			q.Set("projects", *project)
		}
		if *selector != "" {
			q.Set("selector", *selector)
		}
		var list struct {
			Items []cliApp `json:"items"`
		}
		raw, err := c.call(ctx, http.MethodGet, withQuery("/api/v1/applications"), nil, &list)
		if err != nil {
			return err
		}
		if *clusterName != "" {
			if list.Items, raw, err = inCluster(ctx, c, *clusterName, list.Items, raw); err != nil {
				return err
			}
		}
		if out == "json" || out == "yaml" {
			return printRaw(stdout, out, raw)
		}
		return printApps(stdout, list.Items, out == "wide")
	case "get", "history":
		var a cliApp
		raw, err := c.call(ctx, http.MethodGet, withQuery(appPath), nil, &a)
		if err != nil {
			return err
		}
		if out == "json" || out == "yaml" {
			if sub == "history" {
				var h struct {
					Status struct {
						History json.RawMessage `json:"history"`
					} `json:"status"`
				}
				_ = json.Unmarshal(raw, &h)
				raw = h.Status.History
				if len(raw) == 0 {
					raw = []byte("[]")
				}
			}
			return printRaw(stdout, out, raw)
		}
		if sub == "history" {
			return printHistory(stdout, a)
		}
		return printApp(stdout, a)
	case "sync":
		body := map[string]any{"appNamespace": *ns}
		var a cliApp
		if _, err := c.call(ctx, http.MethodPost, appPath+"/sync", body, &a); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "sync of %s/%s requested: %s, %s at %s\n", a.Metadata.Namespace, a.Metadata.Name, a.Status.Sync.Status, a.Status.Health.Status, a.Status.Sync.Revision)
		return nil
	case "rollback":
		if *revision == "" {
			return fmt.Errorf("app rollback: say which release with --revision, e.g. %s", example)
		}
		body := map[string]any{"appNamespace": *ns}
		if id, err := strconv.ParseInt(*revision, 10, 64); err == nil {
			body["id"] = id
		} else {
			body["tag"] = *revision
		}
		var r struct {
			cliApp
			Commit string `json:"commit"`
		}
		if _, err := c.call(ctx, http.MethodPost, appPath+"/rollback", body, &r); err != nil {
			return err
		}
		to, how := r.Status.Sync.Revision, "declared"
		if r.Commit != "" { // the engine's App: its sync revision is the commit
			to, how = *revision, "committed as "+r.Commit
			if _, isID := body["id"]; isID {
				to = "release " + *revision
			}
		}
		fmt.Fprintf(stdout, "%s/%s rolls back to %s (%s)\n", r.Metadata.Namespace, r.Metadata.Name, to, how)
		return nil
	case "restart":
		namespace := *ns
		if namespace == "" {
			var a cliApp
			if _, err := c.call(ctx, http.MethodGet, appPath, nil, &a); err != nil {
				return err
			}
			namespace = a.Metadata.Namespace
		}
		body := map[string]any{"appNamespace": namespace, "namespace": namespace, "resourceName": name,
			"version": "v1", "kind": "Deployment", "group": "apps", "action": "restart", "resourceActionParameters": []any{}}
		if _, err := c.call(ctx, http.MethodPost, appPath+"/resource/actions/v2", body, nil); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "rolling restart of Deployment %s/%s started\n", namespace, name)
		return nil
	case "diff":
		var m struct {
			Items []struct {
				Kind, Namespace, Name string
				TargetState           string `json:"targetState"`
				NormalizedLiveState   string `json:"normalizedLiveState"`
				Modified              bool   `json:"modified"`
			} `json:"items"`
		}
		raw, err := c.call(ctx, http.MethodGet, withQuery(appPath+"/managed-resources"), nil, &m)
		if err != nil {
			return err
		}
		if out == "json" || out == "yaml" {
			return printRaw(stdout, out, raw)
		}
		n := 0
		for _, it := range m.Items {
			if !it.Modified {
				continue
			}
			n++
			live, _ := yaml.JSONToYAML([]byte(it.NormalizedLiveState))
			want, _ := yaml.JSONToYAML([]byte(it.TargetState))
			fmt.Fprintf(stdout, "===== %s %s/%s (- live, + declared) =====\n", it.Kind, it.Namespace, it.Name)
			printLineDiff(stdout, strings.Split(strings.TrimSuffix(string(live), "\n"), "\n"), strings.Split(strings.TrimSuffix(string(want), "\n"), "\n"))
		}
		if n == 0 {
			fmt.Fprintf(stdout, "no differences: %d objects as declared\n", len(m.Items))
		}
		return nil
	case "logs":
		if *tail < 1 || *tail > 5000 {
			return fmt.Errorf("app logs: --tail must be from 1 to 5000")
		}
		q.Set("tailLines", strconv.Itoa(*tail))
		q.Set("follow", strconv.FormatBool(*follow))
		return c.logs(ctx, withQuery(appPath+"/logs"), stdout)
	case "wait":
		if !*health && !*synced {
			*health, *synced = true, true
		}
		q.Set("name", name)
		return c.wait(ctx, "/api/v1/stream/applications?"+q.Encode(), *health, *synced, *timeout, stdout)
	}
	return nil
}

// open sends a GET whose answer is read as it comes; an answer other than
// 200 is a failed error with the server's message.
func (c *apiClient) open(ctx context.Context, path, accept string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.server+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := (&http.Client{}).Do(req) // no timeout: it may follow
	if err != nil {
		return nil, failed("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, c.refused(resp.StatusCode, resp.Body)
	}
	return resp, nil
}

// logs prints the content of Argo CD's log entries, one JSON object a line,
// until the entry marked last (or the caller stops).
func (c *apiClient) logs(ctx context.Context, path string, w io.Writer) error {
	resp, err := c.open(ctx, path, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var e struct {
			Result struct {
				Content string `json:"content"`
				Last    bool   `json:"last"`
			} `json:"result"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue
		}
		if e.Result.Last {
			return nil
		}
		fmt.Fprintln(w, e.Result.Content)
	}
	if ctx.Err() != nil {
		return nil
	}
	if err := sc.Err(); err != nil {
		return failed("the log ended: %v", err)
	}
	return nil
}

// wait follows the application's stream until it is Healthy and/or
// Synced, as asked; at the timeout it fails with the last state seen.
func (c *apiClient) wait(ctx context.Context, path string, health, synced bool, timeout time.Duration, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := c.open(ctx, path, "text/event-stream")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	last := "no state received"
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data:")
		if !ok {
			continue
		}
		var ev struct {
			Result struct {
				Type        string `json:"type"`
				Application cliApp `json:"application"`
			} `json:"result"`
		}
		if json.Unmarshal([]byte(strings.TrimSpace(data)), &ev) != nil {
			continue
		}
		a := ev.Result.Application
		if ev.Result.Type == "DELETED" {
			return failed("%s/%s was deleted", a.Metadata.Namespace, a.Metadata.Name)
		}
		last = fmt.Sprintf("%s, %s at %s", a.Status.Health.Status, a.Status.Sync.Status, orDash(a.Status.Sync.Revision))
		if (!health || a.Status.Health.Status == "Healthy") && (!synced || a.Status.Sync.Status == "Synced") {
			fmt.Fprintf(w, "%s/%s: %s\n", a.Metadata.Namespace, a.Metadata.Name, last)
			return nil
		}
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return failed("not reached in %s; the last state: %s", timeout, last)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return failed("the stream ended; the last state: %s", last)
}

// inCluster keeps the applications of one cluster, named by its name or
// its server URL: the items, and the list's raw answer rewritten to hold
// only them. An application whose destination has no name (deployd reads
// one cluster) is the cluster GET /api/v1/clusters lists. A cluster that
// deployd does not read is an error that lists the ones it does.
func inCluster(ctx context.Context, c *apiClient, name string, items []cliApp, raw []byte) ([]cliApp, []byte, error) {
	var clusters struct {
		Items []struct {
			Name   string `json:"name"`
			Server string `json:"server"`
		} `json:"items"`
	}
	if _, err := c.call(ctx, http.MethodGet, "/api/v1/clusters", nil, &clusters); err != nil {
		return nil, nil, err
	}
	var known []string
	server := ""
	for _, cl := range clusters.Items {
		known = append(known, cl.Name)
		if cl.Name == name || cl.Server == name {
			name, server = cl.Name, cl.Server
		}
	}
	if server == "" {
		return nil, nil, fmt.Errorf("--cluster %q: deployd reads %s", name, strings.Join(known, ", "))
	}
	var whole struct {
		APIVersion string            `json:"apiVersion,omitempty"`
		Kind       string            `json:"kind,omitempty"`
		Metadata   json.RawMessage   `json:"metadata"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &whole); err != nil || len(whole.Items) != len(items) {
		return nil, nil, fmt.Errorf("the application list could not be read: %v", err)
	}
	var keep []cliApp
	kept := []json.RawMessage{}
	for i, a := range items {
		d := a.Spec.Destination
		if d.Name == name || (d.Name == "" && d.Server == server) {
			keep = append(keep, a)
			kept = append(kept, whole.Items[i])
		}
	}
	whole.Items = kept
	out, err := json.Marshal(whole)
	return keep, out, err
}

func printApps(w io.Writer, apps []cliApp, wide bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NAME\tNAMESPACE\tPROJECT\tSYNC\tHEALTH\tREVISION"
	if wide {
		head += "\tCLUSTER\tDESTINATION\tIMAGES\tMESSAGE"
	}
	fmt.Fprintln(tw, head)
	for _, a := range apps {
		line := strings.Join([]string{a.Metadata.Name, a.Metadata.Namespace, a.Spec.Project, a.Status.Sync.Status, a.Status.Health.Status, orDash(shortCommit(a.Status.Sync.Revision))}, "\t")
		if wide {
			line += "\t" + orDash(a.Spec.Destination.Name) + "\t" + orDash(a.Spec.Destination.Server) + "\t" + orDash(strings.Join(a.Status.Summary.Images, ",")) + "\t" + orDash(a.Status.Health.Message)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func printApp(w io.Writer, a cliApp) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, kv := range [][2]string{
		{"Name:", a.Metadata.Namespace + "/" + a.Metadata.Name},
		{"Project:", a.Spec.Project},
		{"Source:", a.Spec.Source.RepoURL + " " + a.Spec.Source.Path},
		{"Destination:", a.Spec.Destination.Server + " " + a.Spec.Destination.Namespace},
		{"Sync:", a.Status.Sync.Status + " to " + orDash(a.Status.Sync.Revision)},
		{"Health:", a.Status.Health.Status + " " + a.Status.Health.Message},
		{"Images:", orDash(strings.Join(a.Status.Summary.Images, ", "))},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", kv[0], strings.TrimSpace(kv[1]))
	}
	return tw.Flush()
}

func printHistory(w io.Writer, a cliApp) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tREVISION\tDEPLOYED AT\tINITIATED BY")
	h := a.Status.History
	for i := len(h) - 1; i >= 0; i-- {
		by := h[i].InitiatedBy.Username
		if h[i].InitiatedBy.Automated {
			by = "automated"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\n", h[i].ID, h[i].Revision, orDash(h[i].DeployedAt), orDash(by))
	}
	return tw.Flush()
}

const engineUsage = `usage: deployd engine <command> [flags]

commands:
  status                the engine's state: source, revision, last run, leader
  reconcile [--dry-run] run it now (SuperAdmin); --dry-run writes nothing
  suspend               stop its interval and webhook runs (SuperAdmin)
  resume                start them again (SuperAdmin)

Every command takes --cluster (with several clusters, the cluster whose
engine it means; default: the first's), --server (env DEPLOYD_SERVER;
default: the server of the last deployd login), --token (env DEPLOYD_TOKEN;
default: the sign-in deployd login kept), --insecure-http (allow an http://
server that is not loopback, the token sent in cleartext) and
-o table|json|yaml.

example:
  deployd engine reconcile --dry-run
  deployd engine status --cluster staging
`

func runEngine(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	sub, args, err := subcommand("engine", engineUsage, args, stdout)
	if sub == "" {
		return err
	}
	example := map[string]string{
		"status": "deployd engine status -o yaml", "reconcile": "deployd engine reconcile --dry-run",
		"suspend": "deployd engine suspend", "resume": "deployd engine resume",
	}[sub]
	if example == "" {
		return fmt.Errorf("engine: unknown command %q\n%s", sub, engineUsage)
	}
	fs := flag.NewFlagSet("engine "+sub, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cf := addClientFlags(fs)
	clusterName := fs.String("cluster", "", "the cluster whose engine (with several clusters; default: the first's)")
	dry := new(bool)
	if sub == "reconcile" {
		dry = fs.Bool("dry-run", false, "report what a run would do, writing nothing")
	}
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: deployd engine %s [flags]\n\nexample:\n  %s\n\nflags:\n", sub, example)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("engine %s: unexpected argument %q", sub, fs.Arg(0))
	}
	c, err := cf.client(ctx)
	if err != nil {
		return err
	}
	method, path := http.MethodPost, "/v1/deploy/gitops/"+sub
	q := url.Values{}
	switch sub {
	case "status":
		method, path = http.MethodGet, "/v1/deploy/gitops"
	case "reconcile":
		path = "/v1/deploy/reconcile"
		if *dry {
			q.Set("dryRun", "true")
		}
	}
	if *clusterName != "" {
		q.Set("cluster", *clusterName)
	}
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	raw, err := c.call(ctx, method, path, nil, nil)
	if err != nil {
		return err
	}
	if sub == "status" {
		// The route also lists the CD Applications: status is the engine.
		var body struct {
			Engine json.RawMessage `json:"engine"`
		}
		if err := json.Unmarshal(raw, &body); err != nil || len(body.Engine) == 0 {
			return failed("the engine's answer is not the JSON expected: %v", err)
		}
		raw = body.Engine
	}
	if *cf.output == "table" || *cf.output == "wide" {
		return printEngine(stdout, sub, raw)
	}
	return printRaw(stdout, *cf.output, raw)
}

// printEngine prints an engine status or a run's report as lines.
func printEngine(w io.Writer, sub string, raw []byte) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	defer tw.Flush()
	if sub == "reconcile" {
		var r gitops.ReconcileReport
		if err := json.Unmarshal(raw, &r); err != nil {
			return failed("the engine's answer is not the JSON expected: %v", err)
		}
		if r.Cluster != "" {
			fmt.Fprintf(tw, "cluster %s, ", r.Cluster)
		}
		fmt.Fprintf(tw, "revision %s: %d declared, %d synced, %d failed, %d pruned\n", orDash(r.Revision), r.Declared, r.Synced, r.Failed, r.Pruned)
		for _, x := range r.Results {
			fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Status, x.Resource, x.Message)
		}
		return nil
	}
	var st gitops.EngineStatus
	if err := json.Unmarshal(raw, &st); err != nil {
		return failed("the engine's answer is not the JSON expected: %v", err)
	}
	state := st.State
	if !st.Enabled {
		state = "disabled"
	}
	if st.Cluster != "" {
		fmt.Fprintf(tw, "Cluster:\t%s\n", st.Cluster)
	}
	fmt.Fprintf(tw, "State:\t%s\nSource:\t%s %s %s\nRevision:\t%s\nRuns:\t%d\n", orDash(state), st.Source.Repo, st.Source.Ref, st.Source.Path, orDash(st.Revision), st.Runs)
	if st.LastRun != nil {
		lr := st.LastRun
		fmt.Fprintf(tw, "Last run:\t%s (%s) at %s: %d declared, %d synced, %d failed, %d pruned\n", lr.ID, lr.Trigger, lr.FinishedAt.UTC().Format(time.RFC3339), lr.Declared, lr.Synced, lr.Failed, lr.Pruned)
		if lr.Error != "" {
			fmt.Fprintf(tw, "Error:\t%s\n", lr.Error)
		}
	}
	if st.Leader != nil {
		fmt.Fprintf(tw, "Leader:\t%s\n", st.Leader.Identity)
	}
	return nil
}

// printLineDiff prints the lines of a and b in order, those only in a
// with "-", those only in b with "+", the shared ones with two spaces (a
// longest common subsequence of the lines).
func printLineDiff(w io.Writer, a, b []string) {
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			fmt.Fprintln(w, "  "+a[i])
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] > lcs[i+1][j]):
			fmt.Fprintln(w, "+ "+b[j])
			j++
		default:
			fmt.Fprintln(w, "- "+a[i])
			i++
		}
	}
}

// shortCommit is a git commit's first seven hex digits (a table's column);
// any other revision (a tag) as it is.
func shortCommit(rev string) string {
	if len(rev) != 40 {
		return rev
	}
	for _, r := range rev {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return rev
		}
	}
	return rev[:7]
}
