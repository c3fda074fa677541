package handlers

import (
	"encoding/json"
	"io"
	"strings"

	"github.com/labstack/echo/v4"
)

func sseHeaders(w *echo.Response) {
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set(echo.HeaderCacheControl, "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(200)
}

// writeSSEData writes one event; each line of data is its own data: line.
func writeSSEData(w io.Writer, event, data string) {
	var b strings.Builder
	if event != "" {
		b.WriteString("event: ")
		b.WriteString(event)
		b.WriteByte('\n')
	}
	for _, line := range strings.Split(data, "\n") {
		b.WriteString("data: ")
		b.WriteString(strings.TrimSuffix(line, "\r"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	_, _ = io.WriteString(w, b.String())
}

func writeSSEJSON(w io.Writer, event string, v any) {
	b, _ := json.Marshal(v)
	writeSSEData(w, event, string(b))
}
