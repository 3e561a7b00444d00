package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A destination's response headers are capped at 64 KiB in all: over the
// cap the attempt fails with an error that says so (the worker reads no
// more of them), under it the answer counts as usual.
func TestResponseHeadersAreCapped(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	huge := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Huge", strings.Repeat("a", 1<<20))
		w.WriteHeader(200)
	})
	fits := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("b", 60<<10))
		w.WriteHeader(200)
	})
	over := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, huge+"/h"))
	under := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, fits+"/h"))
	doc := s.waitTerminal(t, over, 15*time.Second)
	if last, _ := doc["lastError"].(string); doc["status"] != "failed" || !strings.Contains(last, "headers exceeded 65536 bytes") {
		t.Errorf("1 MiB of headers: status %v, lastError %q; want failed saying the headers exceeded 65536 bytes", doc["status"], last)
	}
	if doc := s.waitTerminal(t, under, 15*time.Second); doc["status"] != "completed" {
		t.Errorf("60 KiB of headers: %v %v, want completed", doc["status"], doc["lastError"])
	}
}
