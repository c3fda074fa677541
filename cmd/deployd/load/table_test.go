package load

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// table is one section of the report: a markdown table of figures, each
// row deployd, the API server and the limit, and two ratios of them.
type table struct {
	title string
	rows  []string
}

const tableHead = "| figure | deployd | API server | limit | deployd÷limit | API server÷deployd |\n|---|---:|---:|---:|---:|---:|\n"

// none marks a figure a server has not (the limit does no LIST of Apps).
var none = math.NaN()

func (t *table) add(figure string, deployd, api, limit float64) {
	t.rows = append(t.rows, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |", figure,
		num(deployd), num(api), num(limit), num(deployd/limit), num(api/deployd)))
}

func (t *table) addAll(figure string, v [3]float64) { t.add(figure, v[0], v[1], v[2]) }

func (t *table) String() string {
	return "### " + t.title + "\n\n" + tableHead + strings.Join(t.rows, "\n") + "\n"
}

// num prints a figure with three significant digits, or — for none.
func num(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return "—"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	case a >= 1:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// perSecond is how much of a second's CPU a process used a second.
func perSecond(cpu, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return none
	}
	return cpu.Seconds() / elapsed.Seconds()
}

// tables are the report's sections: lists, watch fan-out, API-server load.
func (cmp *comparison) tables() []string {
	cfg := cmp.cfg
	scale := fmt.Sprintf("%d Apps × %d pods, %s, %d cores", cfg.apps, cfg.replicas, time.Now().UTC().Format("2006-01-02"), runtime.NumCPU())

	lists := &table{title: fmt.Sprintf("Lists (%s; closed loop of c concurrent clients for %s each, vegeta)", scale, cfg.listTime)}
	for i, r := range cmp.lists {
		if i == 0 || cmp.lists[i-1].name != r.name {
			lists.add(r.name+": bytes", float64(r.deployd.bytes), float64(r.api.bytes), float64(r.limit.bytes))
		}
		c := fmt.Sprintf("%s, c%d: ", r.name, r.deployd.concurrency)
		lists.add(c+"p50 ms", ms(r.deployd.p50), ms(r.api.p50), ms(r.limit.p50))
		lists.add(c+"p99 ms", ms(r.deployd.p99), ms(r.api.p99), ms(r.limit.p99))
		lists.add(c+"requests/s", r.deployd.perSecond, r.api.perSecond, r.limit.perSecond)
	}

	watch := &table{title: fmt.Sprintf("Watch fan-out (%s; changes for %s, then a drain of at most %s)", scale, cfg.watchTime, max(10*time.Second, cfg.watchTime))}
	load := &table{title: fmt.Sprintf("API-server load (%s; the same windows)", scale)}
	for _, w := range cmp.watch {
		p := fmt.Sprintf("N=%d, %d/s: ", w.watchers, w.rate)
		each := func(f func(r watchResult) float64) [3]float64 {
			return [3]float64{f(w.deployd), f(w.api), f(w.limit)}
		}
		watch.addAll(p+"bytes per event", each(func(r watchResult) float64 { return float64(len(r.sample)) }))
		watch.addAll(p+"changes sent/s", each(func(r watchResult) float64 { return float64(r.sent) / r.windowSecs }))
		watch.addAll(p+"send (PATCH, or POST to the limit) p50 ms", each(func(r watchResult) float64 { return ms(r.sendP50) }))
		watch.addAll(p+"send p99 ms", each(func(r watchResult) float64 { return ms(r.sendP99) }))
		watch.addAll(p+"delivered ÷ expected", each(func(r watchResult) float64 { return float64(r.delivered) / float64(r.expected()) }))
		watch.addAll(p+"latency p50 ms", each(func(r watchResult) float64 { return ms(r.p50) }))
		watch.addAll(p+"latency p99 ms", each(func(r watchResult) float64 { return ms(r.p99) }))
		watch.addAll(p+"latency max ms", each(func(r watchResult) float64 { return ms(r.max) }))
		watch.addAll(p+"CPU µs per delivered event", each(func(r watchResult) float64 {
			if r.delivered == 0 {
				return none
			}
			return float64(r.cpuPerEvent()) / float64(time.Microsecond)
		}))
		watch.addAll(p+"RSS KiB per watcher", each(func(r watchResult) float64 { return r.rssPerWatcher / 1024 }))
		watch.addAll(p+"streams refused, cut or silent", each(func(r watchResult) float64 { return float64(r.refused + r.ended + r.silent) }))

		load.add(p+"API server CPU s/s", perSecond(w.apiBehindDeployd, w.deployd.elapsed), perSecond(w.api.cpu, w.api.elapsed), none)
		load.addAll(p+"serving process CPU s/s", each(func(r watchResult) float64 { return perSecond(r.cpu, r.elapsed) }))
	}
	out := []string{lists.String(), watch.String(), load.String(), cmp.placement(scale)}
	if cmp.replicas != nil {
		out = append(out, cmp.replicas.table(cfg))
	}
	if len(cmp.notes) > 0 {
		out = append(out, "Notes:\n\n- "+strings.Join(cmp.notes, "\n- ")+"\n")
	}
	return out
}

// placement is the list limit in its own process beside the same handler
// in the harness's process, at the first concurrency: what a server pays
// for being a process of its own, which deployd pays too.
func (cmp *comparison) placement(scale string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Where the list limit runs (%s; c%d)\n\n", scale, cmp.cfg.concurrency[0])
	b.WriteString("| list | own process p50 ms | p99 ms | in the harness's process p50 ms | p99 ms | own ÷ harness's p50 | p99 |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range cmp.lists {
		if r.limitHere.requests == 0 {
			continue
		}
		own, here := r.limit, r.limitHere
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.name, num(ms(own.p50)), num(ms(own.p99)), num(ms(here.p50)), num(ms(here.p99)),
			num(ms(own.p50)/ms(here.p50)), num(ms(own.p99)/ms(here.p99)))
	}
	return b.String()
}

// report logs the tables, appends them to $DEPLOYD_COMPARE_OUT when set,
// and reports the headline ratios as benchmark metrics.
func (cmp *comparison) report(tb testing.TB) {
	tb.Helper()
	text := strings.Join(cmp.tables(), "\n")
	tb.Logf("\n%s", text)
	if path := os.Getenv("DEPLOYD_COMPARE_OUT"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = fmt.Fprintf(f, "%s\n", text)
			err = errors.Join(err, f.Close())
		}
		if err != nil {
			tb.Errorf("DEPLOYD_COMPARE_OUT: %v", err)
		}
	}
	b, ok := tb.(*testing.B)
	if !ok {
		return
	}
	metric := func(v float64, unit string) {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			b.ReportMetric(v, unit)
		}
	}
	for _, r := range cmp.lists {
		if r.deployd.concurrency != cmp.cfg.concurrency[len(cmp.cfg.concurrency)-1] {
			continue
		}
		name := strings.ReplaceAll(r.name, " ", "-")
		metric(ms(r.deployd.p99)/ms(r.limit.p99), name+"-p99-deployd/limit")
		metric(ms(r.api.p99)/ms(r.deployd.p99), name+"-p99-apiserver/deployd")
	}
	for _, w := range cmp.watch {
		p := fmt.Sprintf("watch-N%d-r%d-", w.watchers, w.rate)
		metric(ms(w.deployd.p99)/ms(w.limit.p99), p+"p99-deployd/limit")
		metric(ms(w.api.p99)/ms(w.deployd.p99), p+"p99-apiserver/deployd")
		metric(float64(w.api.cpuPerEvent())/float64(w.deployd.cpuPerEvent()), p+"cpu/event-apiserver/deployd")
		metric(perSecond(w.api.cpu, w.api.elapsed)/perSecond(w.apiBehindDeployd, w.deployd.elapsed), p+"apiserver-cpu-direct/behind-deployd")
	}
	if f := cmp.replicas; f != nil {
		metric(f.apiCPU[2]/f.apiCPU[0], "apiserver-cpu-3replicas/1")
		metric(float64(f.upgradeResets), "upgrade-resets")
		metric(float64(f.upgradeBytes)/f.upgradeSecs/(float64(f.steadyBytes)/f.steadySecs), "upgrade-bytes/s-vs-steady")
	}
}
