package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
)

func TestDrainEnv(t *testing.T) {
	c, err := drainFromEnv(envMap(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.Delay != 5*time.Second || c.Spread != 10*time.Second { // as README.md says
		t.Fatalf("defaults: %+v, want delay 5s and spread 10s", c)
	}
	c, err = drainFromEnv(envMap(map[string]string{"DEPLOYD_DRAIN_DELAY": "1500ms", "DEPLOYD_DRAIN_SPREAD": " 1m "}))
	if err != nil || c.Delay != 1500*time.Millisecond || c.Spread != time.Minute {
		t.Fatalf("set: %+v, %v", c, err)
	}
	c, err = drainFromEnv(envMap(map[string]string{"DEPLOYD_DRAIN_DELAY": "0", "DEPLOYD_DRAIN_SPREAD": "0s"}))
	if err != nil || c != (drainConfig{}) {
		t.Fatalf("zero: %+v, %v", c, err)
	}
}

// TestDrainEnvBadValues: a bad value is an error naming the variable.
func TestDrainEnvBadValues(t *testing.T) {
	for _, c := range []struct{ name, value string }{
		{"DEPLOYD_DRAIN_DELAY", "5"},
		{"DEPLOYD_DRAIN_DELAY", "five seconds"},
		{"DEPLOYD_DRAIN_DELAY", "-1s"},
		{"DEPLOYD_DRAIN_SPREAD", "10"},
		{"DEPLOYD_DRAIN_SPREAD", "-10s"},
	} {
		_, err := drainFromEnv(envMap(map[string]string{c.name: c.value}))
		if err == nil || !strings.HasPrefix(err.Error(), c.name) {
			t.Errorf("%s=%q: got %v, want an error naming %s", c.name, c.value, err, c.name)
		}
	}
}

// TestServeStopsOnBadDrainValue: serve does not start with a bad drain
// setting, and says which.
func TestServeStopsOnBadDrainValue(t *testing.T) {
	t.Setenv("KUBECONFIG", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("DEPLOYD_DRAIN_SPREAD", "ten seconds")
	err := run(context.Background(), []string{"serve", "--listen", "127.0.0.1:0"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "DEPLOYD_DRAIN_SPREAD") {
		t.Fatalf("got %v, want an error naming DEPLOYD_DRAIN_SPREAD", err)
	}
}
