// Command testreport reads the event stream of go test -json on its input and
// prints what go test prints without -v: each package's result line, and the
// whole output of a test that failed (or of a package that did not build or
// was cut off by its timeout). With -summary FILE it appends to FILE the
// package times and the ten slowest tests of the run, for make test to print
// at its end (hack/test.sh). It exits 1 when a test or a package failed, or
// when the stream held no package result at all.
//
// Usage: go test -json ./... | go run ./hack/testreport -label test -summary FILE
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// event is one line of test2json's output.
type event struct {
	Time       time.Time
	Action     string
	Package    string
	Test       string
	Elapsed    float64
	Output     string
	ImportPath string
}

// timing is how long a test or a package took.
type timing struct {
	Name    string
	Seconds float64
	Result  string
}

type report struct {
	out      io.Writer
	running  map[string][]string // package + "\x00" + test → its output so far
	pkgOut   map[string][]string // a package's own lines, printed when it ends
	packages []timing
	tests    []timing
	skipped  []string
	failed   bool
}

func newReport(out io.Writer) *report {
	return &report{out: out, running: map[string][]string{}, pkgOut: map[string][]string{}}
}

func key(e event) string { return e.Package + "\x00" + e.Test }

func (r *report) add(e event) {
	switch {
	case e.Action == "build-output":
		fmt.Fprint(r.out, e.Output)
	case e.Action == "build-fail":
		r.failed = true
	case e.Test == "":
		r.packageEvent(e)
	default:
		r.testEvent(e)
	}
}

func (r *report) testEvent(e event) {
	k := key(e)
	switch e.Action {
	case "run":
		r.running[k] = nil
	case "output":
		r.running[k] = append(r.running[k], e.Output)
	case "pass", "fail", "skip":
		lines := r.running[k]
		delete(r.running, k)
		if e.Action == "fail" {
			r.failed = true
			for _, l := range lines {
				fmt.Fprint(r.out, l)
			}
		}
		if e.Action == "skip" {
			r.skipped = append(r.skipped, e.Package+" "+e.Test)
		}
		if !strings.Contains(e.Test, "/") {
			r.tests = append(r.tests, timing{Name: e.Package + " " + e.Test, Seconds: e.Elapsed, Result: e.Action})
		}
	}
}

func (r *report) packageEvent(e event) {
	switch e.Action {
	case "output":
		r.pkgOut[e.Package] = append(r.pkgOut[e.Package], e.Output)
	case "pass", "fail", "skip":
		if e.Action == "fail" {
			r.failed = true
			// A panic or a timeout ends the binary with tests still running:
			// their output is what tells why.
			for k, lines := range r.running {
				if strings.HasPrefix(k, e.Package+"\x00") {
					for _, l := range lines {
						fmt.Fprint(r.out, l)
					}
					delete(r.running, k)
				}
			}
		}
		for _, l := range r.pkgOut[e.Package] {
			if e.Action == "fail" || !noise(l) {
				fmt.Fprint(r.out, l)
			}
		}
		delete(r.pkgOut, e.Package)
		r.packages = append(r.packages, timing{Name: e.Package, Seconds: e.Elapsed, Result: e.Action})
	}
}

// noise is a line of a passing package that go test without -v would not print.
func noise(l string) bool {
	t := strings.TrimSpace(l)
	return t == "PASS" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- PASS") || strings.HasPrefix(t, "--- SKIP")
}

// summary is the table make test prints at its end.
func (r *report) summary(label string) string {
	var b strings.Builder
	byTime := func(ts []timing) []timing {
		s := append([]timing(nil), ts...)
		sort.SliceStable(s, func(i, j int) bool { return s[i].Seconds > s[j].Seconds })
		return s
	}
	fmt.Fprintf(&b, "%s: packages by time (%d)\n", label, len(r.packages))
	for _, p := range byTime(r.packages) {
		if p.Seconds < 1 && p.Result != "fail" { // quick, or no test files
			continue
		}
		fmt.Fprintf(&b, "  %8.1fs  %-4s %s\n", p.Seconds, p.Result, p.Name)
	}
	fmt.Fprintf(&b, "%s: the ten slowest tests\n", label)
	for i, t := range byTime(r.tests) {
		if i == 10 {
			break
		}
		fmt.Fprintf(&b, "  %8.1fs  %-4s %s\n", t.Seconds, t.Result, t.Name)
	}
	if len(r.skipped) > 0 {
		fmt.Fprintf(&b, "%s: %d skipped: %s\n", label, len(r.skipped), strings.Join(r.skipped, ", "))
	}
	return b.String()
}

func main() {
	label := flag.String("label", "go test", "what the summary calls this run")
	summaryFile := flag.String("summary", "", "append the run's package times and slowest tests to this file")
	flag.Parse()
	r := newReport(os.Stdout)
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// go test prints some lines (a vet or a link failure) as they come.
			fmt.Println(sc.Text())
			continue
		}
		r.add(e)
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testreport:", err)
		os.Exit(1)
	}
	s := r.summary(*label)
	if *summaryFile != "" {
		f, err := os.OpenFile(*summaryFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			_, err = f.WriteString(s)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "testreport:", err)
			os.Exit(1)
		}
	} else {
		fmt.Print(s)
	}
	if r.failed || len(r.packages) == 0 {
		os.Exit(1)
	}
}
