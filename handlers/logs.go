package handlers

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/hanzoai/deploy/projection"
)

const (
	defaultTail   = 400
	maxTail       = 5000
	maxLogBytes   = 512 << 10
	logsHeartbeat = 15 * time.Second
)

type logsAnswer struct {
	App       string `json:"app"`
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	Container string `json:"container"`
	Tail      int    `json:"tail"`
	Log       string `json:"log"`
	Truncated bool   `json:"truncated"`
	// Note says why the log is empty or cut, honestly; never invented text.
	Note string `json:"note,omitempty"`
}

// logs answers the tail of the app's newest running pod (the current
// rollout). An absent pod, or a kubelet the API server cannot reach, is an
// honest 200 with an empty log and a note. follow=true streams as SSE.
func (s *Server) logs(c echo.Context) error {
	snap := s.d.Snapshots.Snapshot()
	a, err := s.nativeApp(c, snap, "container", "tail", "follow")
	if err != nil {
		return err
	}
	q := c.QueryParams()
	tail := defaultTail
	if v, _ := single(q, "tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxTail {
			return errorf(http.StatusBadRequest, "tail must be a number of lines from 1 to 5000")
		}
		tail = n
	}
	follow := false
	switch v, _ := single(q, "follow"); v {
	case "", "false":
	case "true":
		follow = true
	default:
		return errorf(http.StatusBadRequest, "follow must be true or false")
	}
	container, _ := single(q, "container")
	if container != "" {
		if err := validName("container", container); err != nil {
			return err
		}
	}
	ans := logsAnswer{App: a.Name, Namespace: a.Namespace, Container: container, Tail: tail}
	pod := newestRunningPod(a)
	if pod == nil {
		ans.Note = "no running pod of " + a.Name + " to read a log from"
		return s.answerLogs(c, follow, ans)
	}
	ans.Pod = pod.Name
	ps, _ := pod.Spec.(*projection.PodSpec)
	if ans.Container == "" && ps != nil && len(ps.Containers) > 0 {
		ans.Container = ps.Containers[0].Name
		for _, ct := range ps.Containers {
			if projection.ParseImage(ct.Image).Repository == a.Repository {
				ans.Container = ct.Name
				break
			}
		}
	} else if ps != nil && !hasContainer(ps, ans.Container) {
		return errorf(http.StatusBadRequest, "pod "+quoteShort(pod.Name)+" has no container "+quoteShort(ans.Container))
	}
	if s.d.Logs == nil {
		ans.Note = "logs are not available: no Kubernetes configuration"
		return s.answerLogs(c, follow, ans)
	}
	rc, err := s.d.Logs.Logs(c.Request().Context(), LogRequest{
		Namespace: a.Namespace, Pod: pod.Name, Container: ans.Container,
		TailLines: int64(tail), LimitBytes: maxLogBytes, Follow: follow,
	})
	if err != nil {
		s.d.Log.Debug("logs not read", "app", a.Key().String(), "pod", pod.Name, "err", err)
		ans.Note = logNote(err)
		return s.answerLogs(c, follow, ans)
	}
	defer rc.Close()
	if follow {
		return s.followLogs(c, ans, rc)
	}
	b, err := io.ReadAll(io.LimitReader(rc, maxLogBytes+1))
	if err != nil && len(b) == 0 {
		ans.Note = logNote(err)
		return c.JSON(http.StatusOK, ans)
	}
	if len(b) > maxLogBytes {
		b, ans.Truncated = b[:maxLogBytes], true
		ans.Note = "the log was cut at 512 KiB"
	}
	ans.Log = string(b)
	return c.JSON(http.StatusOK, ans)
}

func hasContainer(ps *projection.PodSpec, name string) bool {
	for _, ct := range ps.Containers {
		if ct.Name == name {
			return true
		}
	}
	return false
}

// newestRunningPod is the most recently started running pod of the tree.
func newestRunningPod(a *projection.App) *projection.Object {
	var best *projection.Object
	var bestStart int64
	for _, n := range a.Tree {
		ps, ok := n.Obj.Spec.(*projection.PodSpec)
		if !ok || n.Obj.Kind != projection.KindPod || ps.Phase != "Running" || n.Obj.Deleting {
			continue
		}
		start := ps.StartTime
		if start == 0 {
			start = n.Obj.Created
		}
		if best == nil || start > bestStart || (start == bestStart && n.Obj.Name > best.Name) {
			best, bestStart = n.Obj, start
		}
	}
	return best
}

// logNote says why a log could not be read, safely.
func logNote(err error) string {
	switch {
	case apierrors.IsNotFound(err):
		return "the pod is gone; its log cannot be read"
	case apierrors.IsForbidden(err):
		return "deployd may not read pod logs: its ClusterRole lacks get on pods/log"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the log stream ended early"
	default:
		return "the log could not be read: the kubelet of the pod's node is not reachable through the API server"
	}
}

func (s *Server) answerLogs(c echo.Context, follow bool, ans logsAnswer) error {
	if !follow {
		return c.JSON(http.StatusOK, ans)
	}
	w := c.Response()
	sseHeaders(w)
	_, _ = io.WriteString(w, "retry: 3000\n\n")
	writeSSEJSON(w, "note", ans)
	w.Flush()
	return nil
}

// followLogs streams log lines as SSE events (event "line"), one per line,
// with a comment every 15 s; it ends when the client leaves or the log ends.
func (s *Server) followLogs(c echo.Context, ans logsAnswer, rc io.ReadCloser) error {
	w := c.Response()
	sseHeaders(w)
	_, _ = io.WriteString(w, "retry: 3000\n\n: following "+ans.Pod+"/"+ans.Container+"\n\n")
	w.Flush()
	pumpLines(c.Request().Context(), rc, func() {
		_, _ = io.WriteString(w, ": ping\n\n")
		w.Flush()
	}, func(line string) {
		writeSSEData(w, "line", line)
		w.Flush()
	}, func(err error) {
		ans.Note = "the log stream ended"
		if err != nil {
			ans.Note = logNote(err)
		}
		writeSSEJSON(w, "end", ans)
		w.Flush()
	})
	return nil
}

// pumpLines reads rc line by line until the log ends or ctx does: each line
// goes to onLine, each heartbeat (logsHeartbeat) to onPing, and the end of
// the log, with the reader's error, to onEnd. When ctx ends first it closes
// rc and returns without calling onEnd.
func pumpLines(ctx context.Context, rc io.ReadCloser, onPing func(), onLine func(string), onEnd func(error)) {
	lines := make(chan string, 64)
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() { done <- err; close(lines) }() // done is set before lines closes
		sc := bufio.NewScanner(io.LimitReader(rc, 1<<40))
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
		err = sc.Err()
	}()
	ping := time.NewTicker(logsHeartbeat)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			rc.Close()
			for range lines { // the reader ends once rc is closed
			}
			return
		case <-ping.C:
			onPing()
		case line, ok := <-lines:
			if !ok {
				onEnd(<-done)
				return
			}
			onLine(line)
		}
	}
}
