package handlers

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/hanzoai/deploy/projection"
)

// argoLogParams are Argo CD's ApplicationPodLogsQuery parameters.
var argoLogParams = []string{"namespace", "podName", "container", "sinceSeconds", "sinceTime", "tailLines", "follow",
	"untilTime", "filter", "kind", "group", "resourceName", "previous", "matchCase"}

// argoLogEntry is Argo CD's LogEntry.
type argoLogEntry struct {
	Content      string `json:"content"`
	TimeStamp    string `json:"timeStamp,omitempty"`
	TimeStampStr string `json:"timeStampStr,omitempty"`
	PodName      string `json:"podName"`
	Last         bool   `json:"last,omitempty"`
}

type argoLogResult struct {
	Result argoLogEntry `json:"result"`
}

// argoLogs answers Argo CD's logs route: one {"result": LogEntry} per line
// (SSE data lines for an EventSource, else one JSON object a line), ending
// with an entry marked last. The pod is podName (a Pod of the app's tree)
// or, without it, the app's newest running pod. Options deployd cannot
// honour (sinceSeconds, sinceTime, untilTime, filter, previous) are a 400
// naming them.
func (s *Server) argoLogs(c echo.Context) error {
	a, err := s.appFromPath(c, s.d.Snapshots.Snapshot(), argoLogParams...)
	if err != nil {
		return err
	}
	q := c.QueryParams()
	v := map[string]string{}
	for _, k := range argoLogParams {
		if v[k], err = single(q, k); err != nil {
			return err
		}
	}
	for _, k := range []string{"sinceTime", "untilTime", "filter"} {
		if v[k] != "" {
			return errorf(http.StatusBadRequest, k+" is not supported: deployd reads the last tailLines lines")
		}
	}
	if v["sinceSeconds"] != "" && v["sinceSeconds"] != "0" {
		return errorf(http.StatusBadRequest, "sinceSeconds is not supported: leave it 0 and use tailLines")
	}
	if b, err := boolParam("previous", v["previous"]); err != nil || b {
		if err == nil {
			err = errorf(http.StatusBadRequest, "previous is not supported: deployd reads the running container's log")
		}
		return err
	}
	if _, err := boolParam("matchCase", v["matchCase"]); err != nil {
		return err
	}
	follow, err := boolParam("follow", v["follow"])
	if err != nil {
		return err
	}
	tail := defaultTail
	if t := v["tailLines"]; t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 1 || n > maxTail {
			return errorf(http.StatusBadRequest, "tailLines must be a number of lines from 1 to 5000")
		}
		tail = n
	}
	pod, err := logPod(a, v)
	if err != nil {
		return err
	}
	container := v["container"]
	ps, _ := pod.Spec.(*projection.PodSpec)
	if container == "" && ps != nil && len(ps.Containers) > 0 {
		container = ps.Containers[0].Name
		for _, ct := range ps.Containers {
			if projection.ParseImage(ct.Image).Repository == a.Repository {
				container = ct.Name
				break
			}
		}
	} else if ps != nil && !hasContainer(ps, container) {
		return errorf(http.StatusBadRequest, "pod "+quoteShort(pod.Name)+" has no container "+quoteShort(container))
	}
	if s.d.Logs == nil {
		return errorf(http.StatusServiceUnavailable, "logs are not available: no Kubernetes configuration")
	}
	rc, err := s.d.Logs.Logs(c.Request().Context(), LogRequest{
		Namespace: pod.Namespace, Pod: pod.Name, Container: container,
		TailLines: int64(tail), LimitBytes: maxLogBytes, Follow: follow, Timestamps: true,
	})
	if err != nil {
		return errorCause(http.StatusBadGateway, logNote(err), err)
	}
	defer rc.Close()
	return s.streamArgoLog(c, pod.Name, rc)
}

func boolParam(key, v string) (bool, error) {
	switch v {
	case "", "false":
		return false, nil
	case "true":
		return true, nil
	}
	return false, errorf(http.StatusBadRequest, key+" must be true or false")
}

// logPod is the pod the query names, which must be of the app's tree, or
// the app's newest running pod.
func logPod(a *projection.App, v map[string]string) (*projection.Object, error) {
	ns := v["namespace"]
	if ns == "" {
		ns = a.Namespace
	}
	name := v["podName"]
	if name == "" && (v["kind"] == "Pod" && v["group"] == "") {
		name = v["resourceName"]
	}
	if name != "" {
		n, ok := a.Node(projection.RefToken(projection.KindPod, ns, name))
		if !ok {
			return nil, errorf(http.StatusNotFound, "pod "+quoteShort(name)+" is not part of application "+quoteShort(a.Name))
		}
		return n.Obj, nil
	}
	if v["resourceName"] != "" {
		k := projection.LookupKind(v["group"], v["kind"])
		if _, ok := a.Node(projection.RefToken(k, ns, v["resourceName"])); !k.InRegistry() || !ok {
			return nil, errorf(http.StatusNotFound, "resource "+quoteShort(v["resourceName"])+" is not part of application "+quoteShort(a.Name))
		}
	}
	pod := newestRunningPod(a)
	if pod == nil {
		return nil, errorf(http.StatusNotFound, "application "+quoteShort(a.Name)+" has no running pod to read a log from")
	}
	return pod, nil
}

// streamArgoLog writes the log's lines as Argo CD's LogEntry results and a
// last entry when the log ends; it stops when the client leaves.
func (s *Server) streamArgoLog(c echo.Context, pod string, rc io.ReadCloser) error {
	w := c.Response()
	sse := strings.Contains(c.Request().Header.Get(echo.HeaderAccept), "text/event-stream")
	if sse {
		sseHeaders(w)
	} else {
		w.Header().Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
		w.Header().Set(echo.HeaderCacheControl, "no-store")
		w.WriteHeader(http.StatusOK)
	}
	write := func(e argoLogEntry) {
		if sse {
			writeSSEJSON(w, "", argoLogResult{e})
		} else {
			b, _ := json.Marshal(argoLogResult{e})
			_, _ = w.Write(append(b, '\n'))
		}
		w.Flush()
	}
	pumpLines(c.Request().Context(), rc, func() {
		if sse {
			_, _ = io.WriteString(w, ": ping\n\n")
			w.Flush()
		}
	}, func(line string) {
		write(logLine(pod, line))
	}, func(error) {
		write(argoLogEntry{PodName: pod, Last: true})
	})
	return nil
}

// logLine splits the timestamp the API server prefixes to a line.
func logLine(pod, line string) argoLogEntry {
	e := argoLogEntry{Content: line, PodName: pod}
	if ts, rest, ok := strings.Cut(line, " "); ok {
		if t, err := time.Parse(time.RFC3339Nano, ts); err == nil {
			e.Content, e.TimeStampStr = rest, ts
			e.TimeStamp = t.UTC().Format(time.RFC3339)
		}
	}
	return e
}
