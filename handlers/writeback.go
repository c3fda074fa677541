package handlers

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// Write-back: with the engine on, an App it declares
// lives in git, and a cluster patch of its tag would be undone by the next
// self-heal run. A rollback or release of such an App is a commit instead,
// or, with push off, a 409 naming the file to commit to.

// managedBy reports whether an engine manages the App — it carries the
// tracking label of the instance its cluster's engine is configured with,
// whatever this process has run — with that engine and the file that
// declared the App when this replica's view of the repository knows it
// ("" otherwise).
func (s *Server) managedBy(a *projection.App) (Engine, string, bool) {
	eng := s.engineFor(a.Namespace)
	if eng == nil || a.Engine == nil || a.Engine.Instance != eng.Instance() {
		return nil, "", false
	}
	file, _ := eng.Manages(a.Namespace, a.Name)
	return eng, file, true
}

// pushOffError is the 409 of a managed App's rollback with push off.
func (s *Server) pushOffError(eng Engine, a *projection.App, file string) error {
	src := eng.Status().Source
	where := src.Repo + "/" + file
	if file == "" {
		where = "the file under " + src.Path + " in " + src.Repo + " that declares it"
	}
	return errorf(http.StatusConflict, quoteShort(a.Name)+" is declared in git and reconciled with self-heal; commit the tag to "+where)
}

// withGitHistory is the managed App's history as its status.history tells
// it (gitHistory: one entry per commit, each with its id), so that a
// rollback may name any entry the stock UI shows, by id or by tag.
func (s *Server) withGitHistory(c echo.Context, a *projection.App) []projection.HistoryEntry {
	hist, _, ok := s.gitHistory(c, a)
	if !ok {
		return a.History
	}
	out := make([]projection.HistoryEntry, 0, len(hist))
	for _, h := range hist {
		out = append(out, projection.HistoryEntry{ID: h.ID, Revision: h.Revision})
	}
	return out
}

// writeTag commits the tag through the App's engine and answers the
// Application plus "commit" (none when the tag was already declared).
func (s *Server) writeTag(c echo.Context, eng Engine, a *projection.App, tag, verb string) error {
	w := gitops.TagWrite{Namespace: a.Namespace, Name: a.Name, Tag: tag, Verb: verb, RequestID: newRequestID()}
	c.Response().Header().Set("X-Request-Id", w.RequestID)
	if p := auth.PrincipalFrom(c.Request().Context()); p != nil {
		w.AuthorName, w.AuthorEmail = authorOf(p)
	}
	commit, err := eng.WriteTag(c.Request().Context(), w)
	if err != nil {
		return writeBackError(err)
	}
	auditOf(c).summary += " commit " + commit
	cur := a
	ctx, cancel := context.WithTimeout(c.Request().Context(), 3*time.Second)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		if got := s.d.Snapshots.Snapshot().Get(a.Namespace, a.Name); got != nil {
			cur = got
			if got.Declared == tag {
				break
			}
		}
		select {
		case <-ctx.Done():
			break wait
		case <-tick.C:
		}
	}
	body := bytes.TrimSpace(cur.ApplicationJSON())
	if commit != "" && len(body) > 1 && body[len(body)-1] == '}' {
		sha, _ := json.Marshal(commit)
		body = append(append(append(bytes.Clone(body[:len(body)-1]), `,"commit":`...), sha...), '}')
	}
	return c.JSONBlob(http.StatusOK, body)
}

// authorOf is the commit author for a principal: the name claim, else the
// user name, else the subject; the email, else <sub>@<issuer host>.
func authorOf(p *auth.Principal) (name, email string) {
	name = p.Name
	if name == "" {
		name = p.Username
	}
	if name == "" {
		name = p.Subject
	}
	email = p.Email
	if email == "" {
		host := "localhost"
		if u, err := url.Parse(p.Issuer); err == nil && u.Hostname() != "" {
			host = u.Hostname()
		}
		email = p.Subject + "@" + host
	}
	return name, email
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeBackError maps the engine's write-back errors: a conflict (the ref
// kept moving, push off) is a 409, a request it cannot write a 400, a
// caller gone or out of time a 504, anything else a 502. The engine's
// texts are safe for a client.
func writeBackError(err error) error {
	var nl interface{ NotLeader() bool }
	if errors.As(err, &nl) && nl.NotLeader() {
		return errorf(http.StatusServiceUnavailable, "the engine's leader changed during the request; try again")
	}
	var conflict interface{ Conflict() bool }
	if errors.As(err, &conflict) && conflict.Conflict() {
		return errorf(http.StatusConflict, err.Error())
	}
	var invalid interface{ Invalid() bool }
	if errors.As(err, &invalid) && invalid.Invalid() {
		return errorf(http.StatusBadRequest, err.Error())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return errorf(http.StatusGatewayTimeout, "the write-back did not finish in time; read the engine's ref to see whether it landed")
	}
	return errorf(http.StatusBadGateway, "the write-back failed: "+err.Error())
}

type releaseRequest struct {
	Tag string `json:"tag"`
}

// paasRelease sets the app's declared tag in git: the write-back's commit
// path, for a clean vX.Y.Z tag. env is required, as for deploy.
func (s *Server) paasRelease(c echo.Context) error {
	name, env, namespace, err := paasAppParams(c)
	if err != nil {
		return err
	}
	if env == "" {
		return errorf(http.StatusBadRequest, "env is required: add ?env=main, test or dev (a release never defaults to production)")
	}
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, 1<<16))
	if err != nil {
		return errorf(http.StatusBadRequest, "the release body could not be read (at most 64 KiB)")
	}
	var req releaseRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || dec.More() {
		return errorf(http.StatusBadRequest, `the release body is not valid JSON of the expected shape: send {"tag": "vX.Y.Z"}`)
	}
	if !projection.IsSemverTag(req.Tag) {
		return errorf(http.StatusBadRequest, "tag "+quoteShort(req.Tag)+" is not a release: send a clean vX.Y.Z tag (no floating tags such as latest or v1)")
	}
	rec := auditOf(c)
	rec.summary = "release env=" + env + " tag " + req.Tag
	a, err := s.paasTarget(name, env, namespace)
	if err != nil {
		return err
	}
	rec.namespace = a.Namespace
	if !s.anyEngine() {
		return errorf(http.StatusServiceUnavailable, "a release is a commit to the engine's repository: deploy engine disabled (set DEPLOY_ENGINE_ENABLED=true)")
	}
	eng, file, ok := s.managedBy(a)
	if !ok {
		return errorf(http.StatusConflict, "app "+quoteShort(a.Name)+" in "+a.Namespace+" is not declared in the engine's repository: roll it back instead, or declare it in git")
	}
	if !eng.PushEnabled() {
		return s.pushOffError(eng, a, file)
	}
	if handled, err := s.forwardToLeader(c, eng, body); handled {
		return err
	}
	return s.writeTag(c, eng, a, req.Tag, "release")
}
