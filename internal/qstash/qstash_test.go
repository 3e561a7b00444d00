package qstash

import (
	"net/http"
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]time.Duration{"10s": 10 * time.Second, "5m": 5 * time.Minute, "2h": 2 * time.Hour, "1d": 24 * time.Hour, "30": 30 * time.Second} {
		if got, err := duration(in); err != nil || got != want {
			t.Errorf("duration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "s", "10x", "-5m", "abc"} {
		if _, err := duration(in); err == nil {
			t.Errorf("duration(%q) accepted", in)
		}
	}
}

func TestDedupKey(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	if dedupKey(h, "https://e.com", []byte("a")) != "" {
		t.Error("a key without deduplication headers")
	}
	h.Set("Upstash-Deduplication-Id", "d1")
	if dedupKey(h, "https://e.com", []byte("a")) != "qstash:d1" {
		t.Error("deduplication id not used")
	}
	c := http.Header{}
	c.Set("Upstash-Content-Based-Deduplication", "true")
	c.Set("Upstash-Forward-X-A", "1")
	k1 := dedupKey(c, "https://e.com", []byte("a"))
	k2 := dedupKey(c, "https://e.com", []byte("b"))
	c.Set("Upstash-Forward-X-A", "2")
	k3 := dedupKey(c, "https://e.com", []byte("a"))
	if k1 == "" || k1 == k2 || k1 == k3 {
		t.Errorf("content keys %q %q %q must differ by body and forwarded headers", k1, k2, k3)
	}
}
