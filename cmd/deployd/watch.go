package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/r3labs/sse/v2"
	"gopkg.in/cenkalti/backoff.v1"
)

// watchIdle is how long the watch waits without any frame before it
// reconnects: the server sends a heartbeat every 15 s.
const watchIdle = 45 * time.Second

// errWatchRefused marks an answer that retrying cannot change (401, 403,
// 400): the watch ends with it.
var errWatchRefused = errors.New("refused")

// runWatch follows GET /v1/deploy/stream/applications of a deployd server
// and prints one line per change:
//
//	12:04:05 MODIFIED hanzo/iam Healthy Synced v1.4.2
//
// It starts with one ADDED line per application, resumes after a lost
// connection where it left off (Last-Event-ID), says so when the server
// cannot resume and sends the full list again, and stops with an error on
// 401 or 403. It returns nil when ctx ends. With --summary it prints the
// counts by health and by sync once and returns instead.
func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("watch", flag.ContinueOnError)
	fs.SetOutput(stderr)
	server := fs.String("server", os.Getenv("DEPLOYD_SERVER"), "deployd server URL, e.g. http://127.0.0.1:8080 (env DEPLOYD_SERVER)")
	token := fs.String("token", os.Getenv("DEPLOYD_TOKEN"), "bearer token sent as Authorization: Bearer (env DEPLOYD_TOKEN)")
	name := fs.String("name", "", "only the application with this name")
	project := fs.String("project", "", "only applications of these projects (comma-separated)")
	selector := fs.String("selector", "", "label selector over hanzo.ai/instance, hanzo.ai/env and hanzo.ai/org, e.g. hanzo.ai/env=main")
	summary := fs.Bool("summary", false, "print the number of applications by health and by sync once, then exit")
	insecure := addInsecureHTTPFlag(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("watch: unexpected argument %q; filters are flags (--name, --project, --selector)", fs.Arg(0))
	}
	srv := serverOf(*server)
	if err := refuseCleartext(srv, *insecure); err != nil {
		return err
	}
	streamURL, err := watchURL(srv, *name, *project, *selector)
	if err != nil {
		return err
	}
	// bearer is --token, else the sign-in deployd login kept (refreshed
	// when it has expired): read again at every subscription, so a long
	// watch outlives its ID token.
	bearer := func() (string, error) {
		if *token != "" {
			return *token, nil
		}
		c, err := newAPIClient(srv, "")
		if err != nil {
			return "", err
		}
		return storedToken(ctx, c.server, c.http)
	}
	tok, err := bearer()
	if err != nil {
		return err
	}
	if *summary {
		return summarize(ctx, streamURL, tok, stdout)
	}

	client := sse.NewClient(streamURL, sse.ClientMaxBufferSize(16<<20))
	client.ResponseValidator = validateWatchResponse
	reconnect := backoff.NewExponentialBackOff()
	reconnect.MaxInterval = 10 * time.Second
	reconnect.MaxElapsedTime = 0 // until the subscription's context ends
	client.ReconnectNotify = func(err error, wait time.Duration) {
		fmt.Fprintf(stderr, "%s connection lost (%v); reconnecting in %s\n", clock(), err, wait.Round(100*time.Millisecond))
	}

	p := &watchPrinter{out: stdout, errOut: stderr}
	for {
		// Each subscription ends by itself when nothing at all arrives for
		// watchIdle (a dead connection), and the loop subscribes again.
		if tok, err := bearer(); err != nil {
			return err
		} else if tok != "" {
			client.Headers["Authorization"] = "Bearer " + tok
		}
		subCtx, cancel := context.WithCancel(ctx)
		client.ReconnectStrategy = backoff.WithContext(reconnect, subCtx)
		idle := time.AfterFunc(watchIdle, cancel)
		err := client.SubscribeWithContext(subCtx, "", func(ev *sse.Event) {
			idle.Reset(watchIdle)
			p.print(ev)
		})
		idle.Stop()
		idleEnded := subCtx.Err() != nil
		cancel()
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errWatchRefused):
			return err
		case idleEnded:
			fmt.Fprintf(stderr, "%s no heartbeat for %s; reconnecting\n", clock(), watchIdle)
		default:
			// The server ended the stream (a restart, an expired token, a
			// client too slow to keep up): resume after a pause.
			fmt.Fprintf(stderr, "%s the server ended the stream; resuming\n", clock())
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(time.Second):
			}
		}
	}
}

// watchURL builds the stream URL from the server and the filters.
func watchURL(server, name, project, selector string) (string, error) {
	if server == "" {
		return "", errors.New("watch: no server: pass --server or set DEPLOYD_SERVER (e.g. http://127.0.0.1:8080), or run deployd login --server URL once")
	}
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("watch: --server %q is not an http(s) URL such as http://127.0.0.1:8080", server)
	}
	u = u.JoinPath("/v1/deploy/stream/applications")
	q := url.Values{}
	if name != "" {
		q.Set("name", name)
	}
	if project != "" {
		q.Set("projects", project)
	}
	if selector != "" {
		q.Set("selector", selector)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// validateWatchResponse turns an answer other than 200 into an error: a
// permanent one (the watch ends) for 400, 401 and 403, a retried one
// otherwise.
func validateWatchResponse(_ *sse.Client, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	defer resp.Body.Close()
	msg := serverMessage(resp.Body)
	switch resp.StatusCode {
	case http.StatusUnauthorized:
		return backoff.Permanent(fmt.Errorf("watch: the server refused the token (401 Unauthorized%s): it is missing, invalid or expired; sign in again (deployd login, or pass a token with --token or DEPLOYD_TOKEN): %w", msg, errWatchRefused))
	case http.StatusForbidden:
		return backoff.Permanent(fmt.Errorf("watch: the token is valid but may not read the fleet (403 Forbidden%s): its account needs an organization: %w", msg, errWatchRefused))
	case http.StatusBadRequest:
		return backoff.Permanent(fmt.Errorf("watch: the server refused the request (400 Bad Request%s); check --name, --project and --selector: %w", msg, errWatchRefused))
	}
	return fmt.Errorf("server answered %s%s", resp.Status, msg)
}

// serverMessage reads the message of deployd's error body, as ": <message>"
// ("" when there is none).
func serverMessage(body io.Reader) string {
	var e struct {
		Message string `json:"message"`
	}
	b, _ := io.ReadAll(io.LimitReader(body, 4096))
	if json.Unmarshal(b, &e) == nil && e.Message != "" {
		return ": " + e.Message
	}
	return ""
}

func clock() string { return time.Now().Format("15:04:05") }

// watchPrinter prints one line per applications event.
type watchPrinter struct {
	mu     sync.Mutex
	out    io.Writer
	errOut io.Writer
}

type watchEvent struct {
	Result struct {
		Type        string `json:"type"`
		Application struct {
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
			Status struct {
				Health struct {
					Status string `json:"status"`
				} `json:"health"`
				Sync struct {
					Status   string `json:"status"`
					Revision string `json:"revision"`
				} `json:"sync"`
			} `json:"status"`
		} `json:"application"`
	} `json:"result"`
}

func (p *watchPrinter) print(ev *sse.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if string(ev.Event) == "reset" {
		fmt.Fprintf(p.out, "%s reset: the server could not resume where this watch left off; the full list follows\n", clock())
		return
	}
	if len(ev.Data) == 0 {
		return // the retry advice, a heartbeat, or an id alone
	}
	var we watchEvent
	if err := json.Unmarshal(ev.Data, &we); err != nil || we.Result.Type == "" {
		fmt.Fprintf(p.errOut, "%s skipped a frame that is not an application event\n", clock())
		return
	}
	a := we.Result.Application
	fmt.Fprintf(p.out, "%s %-8s %s/%s %s %s %s\n", clock(), we.Result.Type,
		a.Metadata.Namespace, a.Metadata.Name, orDash(a.Status.Health.Status), orDash(a.Status.Sync.Status), orDash(a.Status.Sync.Revision))
}

func orDash(s string) string {
	if s = strings.TrimSpace(s); s == "" {
		return "-"
	}
	return s
}
