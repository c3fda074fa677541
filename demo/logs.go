package demo

import (
	"fmt"
	"hash/fnv"
	"strings"
	"time"
)

// PodLog is the log of a simulated pod: a few deterministic lines, each
// marked as simulated, ending at now. tail bounds the lines. Nothing runs in
// the demo, so its logs say so instead of pretending.
func PodLog(pod, container string, tail int, now time.Time) string {
	h := fnv.New32a()
	h.Write([]byte(pod + "/" + container))
	seed := h.Sum32()
	lines := []string{
		"[simulated] %s: starting %s",
		"[simulated] %s: loaded configuration",
		"[simulated] %s: listening on :%d",
		"[simulated] %s: ready",
		"[simulated] %s: GET /healthz 200",
	}
	n := 40
	if tail > 0 && tail < n {
		n = tail
	}
	var b strings.Builder
	for i := range n {
		at := now.Add(-time.Duration(n-i) * 15 * time.Second).UTC().Format(time.RFC3339)
		line := lines[min(i, len(lines)-1)]
		var text string
		switch {
		case strings.Contains(line, "%d"):
			text = fmt.Sprintf(line, pod, 8000+int(seed%1000))
		case strings.Count(line, "%s") == 2:
			text = fmt.Sprintf(line, pod, container)
		default:
			text = fmt.Sprintf(line, pod)
		}
		b.WriteString(at + " " + text + "\n")
	}
	return b.String()
}
