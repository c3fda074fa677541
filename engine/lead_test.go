package engine

import (
	"strings"
	"testing"
	"time"
)

// TestLeaseValidate: a Lease that cannot work is refused at start, naming
// what to change; the default timing passes.
func TestLeaseValidate(t *testing.T) {
	good := DefaultLease()
	good.Namespace, good.Identity = "deployd", NewIdentity()
	if err := good.validate(); err != nil {
		t.Fatalf("the default lease: %v", err)
	}
	for _, c := range []struct {
		mut  func(*LeaseConfig)
		want string
	}{
		{func(l *LeaseConfig) { l.Namespace = "" }, "namespace"},
		{func(l *LeaseConfig) { l.Namespace = "Deploy_D" }, "namespace"},
		{func(l *LeaseConfig) { l.Identity = "" }, "identity"},
		{func(l *LeaseConfig) { l.Duration = 1500 * time.Millisecond }, "whole number of seconds"},
		{func(l *LeaseConfig) { l.RenewDeadline = l.Duration }, "renew deadline"},
		{func(l *LeaseConfig) { l.RetryPeriod = l.RenewDeadline }, "retry period"},
	} {
		l := good
		c.mut(&l)
		if err := l.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: got %v, want an error about the %s", l, err, c.want)
		}
	}
	if a, b := NewIdentity(), NewIdentity(); a == b {
		t.Errorf("two identities are the same: %s", a)
	}
}
