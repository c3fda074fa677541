package handlers

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/gitops"
	"github.com/hanzoai/deploy/projection"
)

// History from git: for an App the engine declares,
// status.history and the revision metadata come from the commits that
// touched its file, joined with the ReplicaSet history by image tag. The
// join is made here, on read: the fold never sees the commits.

// gitHistoryEntry is one status.history entry of a managed App: Argo CD's
// fields, plus the commit.
type gitHistoryEntry struct {
	ID              int64          `json:"id"`
	Revision        string         `json:"revision"`
	DeployedAt      string         `json:"deployedAt,omitempty"`
	DeployStartedAt string         `json:"deployStartedAt,omitempty"`
	Source          any            `json:"source,omitempty"`
	InitiatedBy     map[string]any `json:"initiatedBy,omitempty"`
	Commit          string         `json:"commit,omitempty"`
	Author          string         `json:"author,omitempty"`
	Message         string         `json:"message,omitempty"`
}

// gitHistory is the managed App's history, newest first: one entry per
// commit that touched its file (revision: the tag it declares; id: the
// ReplicaSet revision that ran that tag, on the newest commit declaring
// it, else commitID), then the ReplicaSet releases no commit declares. ok is false when
// the App is not managed or its commits cannot be read.
func (s *Server) gitHistory(c echo.Context, a *projection.App) ([]gitHistoryEntry, []gitops.GitCommit, bool) {
	eng, _, managed := s.managedBy(a)
	if !managed {
		return nil, nil, false
	}
	commits, err := eng.History(c.Request().Context(), a.Namespace, a.Name)
	if err != nil || len(commits) == 0 {
		return nil, nil, false
	}
	ids := map[string]projection.HistoryEntry{}
	for _, h := range a.History {
		if h.ID > 0 {
			ids[h.Revision] = h
		}
	}
	used := map[string]bool{}
	out := make([]gitHistoryEntry, 0, len(commits)+len(a.History))
	for _, gc := range commits {
		e := gitHistoryEntry{Revision: gc.Tag, Commit: gc.SHA, Author: gc.Author, Message: gc.Message,
			DeployedAt: gc.Date.UTC().Format(time.RFC3339), InitiatedBy: map[string]any{"username": gc.Author}}
		if e.Revision == "" {
			e.Revision = gc.SHA
		}
		if h, ok := ids[gc.Tag]; ok && !used[gc.Tag] {
			used[gc.Tag] = true
			e.ID = h.ID
			e.DeployedAt, e.DeployStartedAt = projection.Timestamp(h.DeployedAt), projection.Timestamp(h.DeployStartedAt)
		}
		if e.ID == 0 {
			e.ID = commitID(gc.SHA)
		}
		out = append(out, e)
	}
	declared := map[string]bool{}
	for _, gc := range commits {
		declared[gc.Tag] = true
	}
	for i := len(a.History) - 1; i >= 0; i-- {
		h := a.History[i]
		if !declared[h.Revision] {
			out = append(out, gitHistoryEntry{ID: h.ID, Revision: h.Revision,
				DeployedAt: projection.Timestamp(h.DeployedAt), DeployStartedAt: projection.Timestamp(h.DeployStartedAt)})
		}
	}
	return out, commits, true
}

// applicationWithGitHistory answers the managed App's Application with its
// git history in status.history (each entry with the spec's source).
func (s *Server) applicationWithGitHistory(c echo.Context, a *projection.App, hist []gitHistoryEntry) error {
	var doc map[string]any
	if err := json.Unmarshal(a.ApplicationJSON(), &doc); err != nil {
		return err
	}
	spec, _ := doc["spec"].(map[string]any)
	status, _ := doc["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
		doc["status"] = status
	}
	for i := range hist {
		hist[i].Source = spec["source"]
	}
	status["history"] = hist
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.JSON(http.StatusOK, doc)
}

// gitRevisionMetadata answers the metadata of a commit of a managed App,
// named by its SHA (or a prefix of at least 7) or by the tag it declared
// (the newest such commit).
func gitRevisionMetadata(commits []gitops.GitCommit, rev string) (revisionMetadata, bool) {
	for _, gc := range commits {
		if gc.Tag == rev || gc.SHA == rev || (len(rev) >= 7 && strings.HasPrefix(gc.SHA, rev)) {
			m := revisionMetadata{Date: gc.Date.UTC().Format(time.RFC3339), Message: gc.Message, Author: gc.Author}
			if gc.Tag != "" {
				m.Tags = []string{gc.Tag}
			}
			return m, true
		}
	}
	return revisionMetadata{}, false
}

// commitID is the history id of a commit no ReplicaSet ran: 2^52 plus the
// first 48 bits of its hash. Every entry the stock UI shows has an id (its
// ROLLBACK sends it); this one is stable across reads and replicas, never a
// ReplicaSet revision, and exact in a JavaScript number (below 2^53).
func commitID(sha string) int64 {
	if len(sha) < 12 {
		return 0
	}
	v, err := strconv.ParseUint(sha[:12], 16, 64)
	if err != nil {
		return 0
	}
	return 1<<52 | int64(v)
}
