package projection

import (
	"strconv"
	"strings"
)

// shortReason is the parenthesised cause of an unhealthy node in an
// application's health message: a pod's waiting or termination reason, else
// the node's health message cut short, else its status.
func shortReason(o *Object, h Health) string {
	if p, ok := o.Spec.(*PodSpec); ok && !o.Deleting {
		for _, cs := range p.Statuses {
			if cs.Waiting && cs.WaitingReason != "" && cs.WaitingReason != "ContainerCreating" {
				return cs.WaitingReason
			}
			if cs.Terminated != nil && cs.Terminated.Reason != "" {
				return cs.Terminated.Reason
			}
		}
	}
	if w, ok := o.Spec.(*WorkloadSpec); ok && !o.Deleting {
		if c := findCondition(w.Conditions, "Progressing"); c != nil && c.Reason == "ProgressDeadlineExceeded" {
			return c.Reason
		}
	}
	msg := h.Message
	if msg == "" {
		return string(h.Status)
	}
	if len(msg) > 80 {
		msg = msg[:77] + "..."
	}
	return msg
}

// appHealth is the worst health over the App node and its live children,
// with a message naming up to three causes. prev is the previous version's,
// reused when equal.
func appHealth(tree []*NodeInfo, prev Health) Health {
	worst := HealthHealthy
	for _, n := range tree {
		if n.HasHealth && n.Health.Status.Worse(worst) {
			worst = n.Health.Status
		}
	}
	if worst == HealthHealthy {
		return Health{Status: HealthHealthy}
	}
	total, size := 0, len("Caused by ")+len(" and 999999 more")
	for _, n := range tree {
		if n.HasHealth && n.Health.Status == worst {
			if total < 3 {
				size += causeLen(n) + 2
			}
			total++
		}
	}
	var b strings.Builder
	b.Grow(size)
	b.WriteString("Caused by ")
	i := 0
	for _, n := range tree {
		if !n.HasHealth || n.Health.Status != worst || i == 3 {
			continue
		}
		switch {
		case i == 0:
		case i == total-1:
			b.WriteString(" and ")
		default:
			b.WriteString(", ")
		}
		writeCause(&b, n)
		i++
	}
	if total > 3 {
		b.WriteString(" and ")
		b.WriteString(strconv.Itoa(total - 3))
		b.WriteString(" more")
	}
	h := Health{Status: worst, Message: b.String()}
	if h == prev {
		return prev
	}
	return h
}

// healthChange gathers the health changes of a patched tree's nodes, to
// tell the App's new health without reading the other nodes where it can:
// a node that stays better than the App's worst changes nothing, and on a
// healthy App, one node turning worse is alone the cause.
type healthChange struct {
	sole *NodeInfo // the one node that turned a healthy App worse
	scan bool      // every node must be read
}

// add records a node's change from prev to next on an App whose health was
// worst.
func (hc *healthChange) add(worst HealthCode, prev, next *NodeInfo) {
	// below: the node takes no part in the App's health or its message.
	below := func(n *NodeInfo) bool {
		return !n.HasHealth || n.Health.Status.rank() < worst.rank() || worst == HealthHealthy && n.Health.Status == HealthHealthy
	}
	switch {
	case below(prev) && below(next):
	case worst == HealthHealthy && below(prev) && hc.sole == nil:
		hc.sole = next
	default:
		hc.scan = true
	}
}

// health is the App's health after the changes added; prev is its health
// before them.
func (hc *healthChange) health(tree []*NodeInfo, prev Health) Health {
	switch {
	case hc.scan:
		return appHealth(tree, prev)
	case hc.sole != nil:
		// The one unhealthy node reads as the whole tree would.
		return appHealth([]*NodeInfo{hc.sole}, prev)
	}
	return prev
}
