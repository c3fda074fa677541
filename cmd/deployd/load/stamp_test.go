package load

import (
	"fmt"
	"testing"
	"time"
)

func TestStampIn(t *testing.T) {
	at := time.Unix(1_800_000_000, 123_456_789)
	for _, tc := range []struct {
		frame string
		want  time.Time
		found bool
	}{
		{fmt.Sprintf(`data: {"tag":%q}`, stamp(at)), at, true},
		{fmt.Sprintf(`{"namespace":"default-x","tag":%q}`, stamp(at)), at, true},
		{`{"namespace":"default-x","tag":"v1"}`, time.Time{}, false},
		{`{"tag":"lt-123"}`, time.Time{}, false},
	} {
		got, ok := stampIn([]byte(tc.frame))
		if ok != tc.found || !got.Equal(tc.want) {
			t.Errorf("stampIn(%s) = %v, %v; want %v, %v", tc.frame, got, ok, tc.want, tc.found)
		}
	}
}

func TestLatencyQuantiles(t *testing.T) {
	var l latencies
	for i := 1; i <= 1000; i++ {
		l.add(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 500 * time.Millisecond}, {0.99, 990 * time.Millisecond}, {1, time.Second}} {
		got := l.quantile(tc.q)
		if got < tc.want || float64(got) > float64(tc.want)*1.125 {
			t.Errorf("quantile(%v) = %s, want within [%s, +12.5%%]", tc.q, got, tc.want)
		}
	}
	if got := l.maximum(); got != time.Second {
		t.Errorf("max = %s, want 1s", got)
	}
	for us := uint64(0); us < 1<<20; us += 1 + us/7 {
		if i := latencyBucket(us); us >= latencyBucketTop(i) || (i > 0 && us < latencyBucketTop(i-1)) {
			t.Fatalf("%dµs in bucket %d of [%d, %d)", us, i, latencyBucketTop(i-1), latencyBucketTop(i))
		}
	}
}
