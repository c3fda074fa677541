package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/hanzoai/deploy/projection"
	"github.com/labstack/echo/v4"
)

// rollbackRequest is Argo CD's rollback body ({"id": N, …}) or deployd's
// ({"tag": "vX.Y.Z"}).
type rollbackRequest struct {
	ID           *int64 `json:"id"`
	Tag          string `json:"tag"`
	DryRun       bool   `json:"dryRun"`
	Prune        bool   `json:"prune"`
	Name         string `json:"name"`
	AppNamespace string `json:"appNamespace"`
	Project      string `json:"project"`
}

const rollbackUsage = `send {"id": <history id>} or {"tag": "vX.Y.Z"}`

// parseRollback decodes and checks a rollback body against the app's
// history; it returns the tag to roll back to.
func parseRollback(body []byte, a *projection.App) (string, rollbackRequest, error) {
	return parseRollbackIn(body, a, a.History)
}

// parseRollbackIn is parseRollback against the given history (the App's
// joined with the tags its file declared in git, for a managed App).
func parseRollbackIn(body []byte, a *projection.App, history []projection.HistoryEntry) (string, rollbackRequest, error) {
	var req rollbackRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return "", req, errorf(http.StatusBadRequest, "the rollback body is not valid JSON of the expected shape: "+rollbackUsage)
	}
	if dec.More() {
		return "", req, errorf(http.StatusBadRequest, "the rollback body holds more than one JSON value: "+rollbackUsage)
	}
	switch {
	case req.ID == nil && req.Tag == "":
		return "", req, errorf(http.StatusBadRequest, "the rollback body names no release: "+rollbackUsage)
	case req.ID != nil && req.Tag != "":
		return "", req, errorf(http.StatusBadRequest, "the rollback body names both an id and a tag: send one of them")
	case req.Prune:
		return "", req, errorf(http.StatusBadRequest, "prune is not supported: deployd never deletes resources on rollback; send prune: false")
	}
	if err := sameApp(a, req.Name, req.AppNamespace, req.Project); err != nil {
		return "", req, err
	}
	if req.ID != nil {
		for _, h := range history {
			if h.ID == *req.ID && h.ID > 0 {
				if !projection.IsSemverTag(h.Revision) {
					return "", req, errorf(http.StatusBadRequest, "history id "+strconv.FormatInt(h.ID, 10)+" ran "+quoteShort(h.Revision)+", which is not a vX.Y.Z release: roll back by tag")
				}
				return h.Revision, req, nil
			}
		}
		return "", req, errorf(http.StatusBadRequest, "the history of "+quoteShort(a.Name)+" has no id "+strconv.FormatInt(*req.ID, 10)+"; its ids are "+historyIDsIn(history))
	}
	if !projection.IsSemverTag(req.Tag) {
		return "", req, errorf(http.StatusBadRequest, "tag "+quoteShort(req.Tag)+" is not a release: send a clean vX.Y.Z tag")
	}
	for _, h := range history {
		if h.Revision == req.Tag {
			return req.Tag, req, nil
		}
	}
	return "", req, errorf(http.StatusBadRequest, quoteShort(req.Tag)+" was never released to "+quoteShort(a.Name)+"; its history holds "+historyTagsIn(history))
}

func historyIDsIn(history []projection.HistoryEntry) string {
	var ids []string
	for _, h := range history {
		if h.ID > 0 {
			ids = append(ids, strconv.FormatInt(h.ID, 10))
		}
	}
	if len(ids) == 0 {
		return "none (roll back by tag)"
	}
	return strings.Join(ids, ", ")
}

func historyTags(a *projection.App) string { return historyTagsIn(a.History) }

func historyTagsIn(history []projection.HistoryEntry) string {
	var tags []string
	for _, h := range history {
		if projection.IsSemverTag(h.Revision) {
			tags = append(tags, h.Revision)
		}
	}
	if len(tags) == 0 {
		return "no vX.Y.Z release"
	}
	return strings.Join(tags, ", ")
}

// rollback pins the App's declared tag to a prior release; the operator
// rolls it out. It answers the Application.
func (s *Server) rollback(params []string) echo.HandlerFunc {
	return func(c echo.Context) error {
		body, err := io.ReadAll(c.Request().Body)
		if err != nil {
			return errorf(http.StatusBadRequest, "the rollback body could not be read (at most 64 KiB)")
		}
		namespaceFromBody(c, body, params)
		a, err := s.writableApp(c, params)
		if err != nil {
			return err
		}
		if a.Repository == "" {
			return errorf(http.StatusUnprocessableEntity, quoteShort(a.Name)+" declares no image repository (spec.image.repository): there is nothing to roll back")
		}
		eng, file, managed := s.managedBy(a)
		history := a.History
		if managed {
			history = s.withGitHistory(c, a)
		}
		tag, req, err := parseRollbackIn(body, a, history)
		rec := auditOf(c)
		rec.summary = summarizeRollback(req)
		if err != nil {
			return err
		}
		rec.summary += " -> " + tag
		if managed && !eng.PushEnabled() {
			return s.pushOffError(eng, a, file)
		}
		if req.DryRun {
			return c.JSONBlob(http.StatusOK, a.ApplicationJSON())
		}
		if managed {
			// A commit: the engine's leader makes it.
			if handled, err := s.forwardToLeader(c, eng, body); handled {
				return err
			}
			return s.writeTag(c, eng, a, tag, "rollback")
		}
		patch := map[string]any{
			"metadata": map[string]any{"annotations": s.syncAnnotations(c)},
			"spec":     map[string]any{"image": map[string]any{"tag": tag}},
		}
		return s.patchAndAnswer(c, a, patch)
	}
}

func summarizeRollback(r rollbackRequest) string {
	switch {
	case r.ID != nil:
		return "rollback id " + strconv.FormatInt(*r.ID, 10)
	case r.Tag != "":
		return "rollback tag " + r.Tag
	}
	return "rollback"
}
