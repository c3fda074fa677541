package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func stream(t *testing.T, events ...event) []event {
	t.Helper()
	for i := range events {
		b, err := json.Marshal(events[i])
		if err != nil {
			t.Fatal(err)
		}
		var back event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		events[i] = back
	}
	return events
}

// A failed test's output is printed and a passing one's is not; the package
// result lines are; the summary orders tests slowest first and keeps ten.
func TestReport(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	evs := []event{
		{Action: "run", Package: "p", Test: "TestGood"},
		{Action: "output", Package: "p", Test: "TestGood", Output: "good detail\n"},
		{Action: "pass", Package: "p", Test: "TestGood", Elapsed: 3},
		{Action: "run", Package: "p", Test: "TestBad"},
		{Action: "output", Package: "p", Test: "TestBad", Output: "    bad_test.go:9: wanted 2\n"},
		{Action: "fail", Package: "p", Test: "TestBad", Elapsed: 7},
		{Action: "output", Package: "p", Output: "FAIL\tp\t10.0s\n"},
		{Action: "fail", Package: "p", Elapsed: 10},
		{Action: "output", Package: "q", Output: "PASS\n"},
		{Action: "output", Package: "q", Output: "ok  \tq\t1.5s\n"},
		{Action: "pass", Package: "q", Elapsed: 1.5},
	}
	for i := 0; i < 12; i++ {
		n := "TestMany" + string(rune('A'+i))
		evs = append(evs, event{Action: "run", Package: "q", Test: n}, event{Action: "pass", Package: "q", Test: n, Elapsed: float64(i) / 10})
	}
	for _, e := range stream(t, evs...) {
		r.add(e)
	}
	got := out.String()
	if strings.Contains(got, "good detail") || strings.Contains(got, "PASS\n") {
		t.Errorf("a passing test's output or PASS was printed:\n%s", got)
	}
	for _, want := range []string{"wanted 2", "FAIL\tp\t10.0s", "ok  \tq\t1.5s"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if !r.failed {
		t.Error("a failed test did not fail the report")
	}
	s := r.summary("go test")
	lines := strings.Split(strings.TrimSpace(s[strings.Index(s, "ten slowest"):]), "\n")[1:]
	if len(lines) != 10 || !strings.Contains(lines[0], "TestBad") || !strings.Contains(lines[1], "TestGood") {
		t.Errorf("slowest tests:\n%s", s)
	}
	if !strings.Contains(s, "10.0s  fail p") {
		t.Errorf("package times:\n%s", s)
	}
}

// A package cut off by its timeout prints the output of the tests still
// running, which says where it hung.
func TestReportTimeout(t *testing.T) {
	var out bytes.Buffer
	r := newReport(&out)
	for _, e := range stream(t,
		event{Action: "run", Package: "p", Test: "TestHang"},
		event{Action: "output", Package: "p", Test: "TestHang", Output: "panic: test timed out after 25m0s\n"},
		event{Action: "fail", Package: "p", Elapsed: 1500},
	) {
		r.add(e)
	}
	if !strings.Contains(out.String(), "timed out") || !r.failed {
		t.Errorf("a timed-out package: failed=%v\n%s", r.failed, out.String())
	}
}
