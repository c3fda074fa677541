package handlers

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/auth"
	"github.com/hanzoai/deploy/gitops"
)

// The engine's routes. Reconcile is a write (SuperAdmin, checked first);
// the git webhook authenticates by HMAC instead of a principal. Both are
// audited like every write.
const (
	reconcilePath = "/v1/deploy/reconcile"
	webhookPath   = "/v1/deploy/webhook/git"
	suspendPath   = "/v1/deploy/gitops/suspend"
	resumePath    = "/v1/deploy/gitops/resume"

	// engineDisabled is the answer of every engine route without an engine.
	engineDisabled = "deploy engine disabled (set DEPLOY_ENGINE_ENABLED=true)"

	// webhookBodyLimit bounds a webhook delivery: a push of a manifest
	// repository is a few KiB; GitHub's payloads can reach megabytes only
	// with hundreds of commits, and the interval run still catches those.
	webhookBodyLimit = 1 << 20
)

func (s *Server) engineRoutes() {
	s.handle(http.MethodPost, reconcilePath, s.reconcile, s.requireEngineWriter, s.onLeader)
	// The webhook verifies its signature before it forwards (gitWebhook).
	s.handle(http.MethodPost, webhookPath, s.gitWebhook, s.selectEngine)
	s.handle(http.MethodPost, suspendPath, s.suspendEngine, s.requireEngineWriter, s.onLeader)
	s.handle(http.MethodPost, resumePath, s.resumeEngine, s.requireEngineWriter, s.onLeader)
}

// suspendEngine stops the engine's interval and webhook runs and refuses
// reconcile requests until resume; it answers the engine's status. The
// suspension is kept in the cluster: every replica and every restart sees
// it.
func (s *Server) suspendEngine(c echo.Context) error {
	if err := checkParams(c.QueryParams(), "cluster"); err != nil {
		return err
	}
	if err := drainBody(c); err != nil {
		return err
	}
	by := "unknown"
	if p := auth.PrincipalFrom(c.Request().Context()); p != nil {
		by, _ = authorOf(p)
	}
	rec := auditOf(c)
	rec.summary = "suspend the engine"
	st, err := s.routeEngine(c).Suspend(c.Request().Context(), by)
	if err != nil {
		return engineError(err)
	}
	return c.JSON(http.StatusOK, st)
}

// resumeEngine undoes suspend and queues a run.
func (s *Server) resumeEngine(c echo.Context) error {
	if err := checkParams(c.QueryParams(), "cluster"); err != nil {
		return err
	}
	if err := drainBody(c); err != nil {
		return err
	}
	auditOf(c).summary = "resume the engine"
	st, err := s.routeEngine(c).Resume(c.Request().Context())
	if err != nil {
		return engineError(err)
	}
	return c.JSON(http.StatusOK, st)
}

// engineError maps an engine's error: a conflict (suspended) is a 409, a
// replica that lost the lead in between a 503 to retry, anything else a
// 502 with the engine's text (safe for a client).
func engineError(err error) error {
	var conflict interface{ Conflict() bool }
	if errors.As(err, &conflict) && conflict.Conflict() {
		return errorf(http.StatusConflict, err.Error())
	}
	var nl interface{ NotLeader() bool }
	if errors.As(err, &nl) && nl.NotLeader() {
		return errorf(http.StatusServiceUnavailable, "the engine's leader changed during the request; try again")
	}
	return errorCause(http.StatusBadGateway, err.Error(), err)
}

// requireEngineWriter admits SuperAdmins only (401 without a principal, 403
// for anyone else), then resolves the engine the request names
// (selectEngine) and answers 503 when that cluster runs none.
func (s *Server) requireEngineWriter(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if err := superAdminOnly(c, "writes are"); err != nil {
			return err
		}
		return s.selectEngine(func(c echo.Context) error {
			if s.routeEngine(c) == nil {
				return s.noEngine(c)
			}
			return next(c)
		})(c)
	}
}

// reconcile runs the engine (or joins its run in flight) and answers the
// run's report: 200 also when objects failed, 502 with the engine's safe
// reason when the run could not complete.
func (s *Server) reconcile(c echo.Context) error {
	q := c.QueryParams()
	if err := checkParams(q, "dryRun", "cluster"); err != nil {
		return err
	}
	v, err := single(q, "dryRun")
	if err != nil {
		return err
	}
	var dryRun bool
	switch {
	case !q.Has("dryRun"), v == "false":
	case v == "true":
		dryRun = true
	default:
		return errorf(http.StatusBadRequest, "dryRun must be true or false, not "+quoteShort(v))
	}
	if err := drainBody(c); err != nil {
		return err
	}
	rec := auditOf(c)
	rec.summary = "reconcile dryRun=" + strconv.FormatBool(dryRun)
	report, err := s.routeEngine(c).Reconcile(c.Request().Context(), gitops.TriggerRequest, dryRun)
	if err != nil {
		return engineError(err)
	}
	if report == nil {
		return errorf(http.StatusBadGateway, "the engine answered no report")
	}
	// Requests that share a run share its report: answer a copy.
	out := *report
	if out.Results == nil {
		out.Results = []gitops.ReconcileResult{}
	}
	rec.summary += " revision=" + out.Revision + " declared=" + strconv.Itoa(out.Declared) + " synced=" + strconv.Itoa(out.Synced) +
		" failed=" + strconv.Itoa(out.Failed) + " pruned=" + strconv.Itoa(out.Pruned)
	return c.JSON(http.StatusOK, out)
}

// webhookAnswer is the answer of an accepted delivery.
type webhookAnswer struct {
	Queued bool   `json:"queued"`
	Event  string `json:"event"`
	Ref    string `json:"ref,omitempty"`
	// Delivery is the delivery's id, when it names one; Duplicate says it
	// was received before (within webhookReplayWindow) and not run again.
	Delivery  string `json:"delivery,omitempty"`
	Duplicate bool   `json:"duplicate,omitempty"`
	// Ignored says why no run was queued.
	Ignored string `json:"ignored,omitempty"`
}

// gitWebhook queues a run for a signed push to the engine's ref. Without a
// configured secret every delivery is refused with 503: an unsigned
// webhook would let anyone start runs, and 503 tells whoever configures the
// hook which setting is missing (a 401 would send them looking for a wrong
// secret). Nothing starts, and nothing is forwarded to the engine's
// leader, unless the signature verifies on the replica that received it;
// the leader verifies it again. A delivery whose id the leader received
// within the last hour is answered 200 and not run twice (GitHub and
// Gitea redeliver with the same id).
//
// With several clusters, each cluster's engine has its hook:
// ?cluster=<name> names it (the first cluster's when absent), and its
// secret (its entry's, else DEPLOY_ENGINE_WEBHOOK_SECRET).
func (s *Server) gitWebhook(c echo.Context) error {
	eng := s.routeEngine(c)
	if eng == nil {
		return s.noEngine(c)
	}
	secret := s.webhookSecret(c)
	if len(secret) == 0 {
		return errorf(http.StatusServiceUnavailable, "the git webhook is not configured: set DEPLOY_ENGINE_WEBHOOK_SECRET (or the cluster's engine.webhookSecretFile) to the hook's secret")
	}
	r := c.Request()
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), r.Body, webhookBodyLimit))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errorf(http.StatusRequestEntityTooLarge, "the webhook body is larger than 1 MiB: nothing was queued (the interval run will pick the push up)")
		}
		return errorCause(http.StatusBadRequest, "the webhook body could not be read", err)
	}
	rec := auditOf(c)
	rec.summary = "git webhook"
	if err := verifyWebhook(secret, r.Header, body); err != nil {
		return err
	}
	if handled, err := s.forwardToLeader(c, eng, body); handled {
		return err
	}
	ans := webhookAnswer{Event: webhookEvent(r.Header), Delivery: webhookDelivery(r.Header)}
	rec.summary += " event=" + ans.Event
	if ans.Delivery != "" {
		rec.summary += " delivery=" + ans.Delivery
		name, _ := c.Get(engineClusterKey).(string)
		if at, seen := s.deliveries.seen(name, ans.Delivery, s.d.Now()); seen {
			ans.Duplicate = true
			ans.Ignored = "delivery " + quoteShort(ans.Delivery) + " was received at " + at.UTC().Format(time.RFC3339) + "; a delivery runs once"
			rec.summary += " duplicate"
			return c.JSON(http.StatusOK, ans)
		}
	}
	if ans.Event != "push" {
		ans.Ignored = "a " + quoteShort(ans.Event) + " event starts no run (only push does)"
		return c.JSON(http.StatusAccepted, ans)
	}
	p, err := parsePush(body)
	if err != nil {
		return err
	}
	ans.Ref = p.Ref
	rec.summary += " ref=" + p.Ref
	ref := eng.Status().Source.Ref
	switch {
	case !refMatches(p.Ref, ref):
		ans.Ignored = "the push is to " + quoteShort(p.Ref) + "; the engine follows " + quoteShort(ref)
	case p.Deleted:
		ans.Ignored = "the push deleted " + quoteShort(p.Ref)
	default:
		ans.Queued = true
		eng.Trigger(gitops.TriggerWebhook)
	}
	if ans.Queued {
		rec.summary += " queued"
	} else {
		rec.summary += " ignored"
	}
	return c.JSON(http.StatusAccepted, ans)
}
