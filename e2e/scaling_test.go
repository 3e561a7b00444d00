package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// Four worker processes share the work through Redis alone: each of them
// performs some of the attempts.
func TestFourWorkersAllTakeWork(t *testing.T) {
	t.Parallel()
	s := startStack(t, 4, "WORKER_CONCURRENCY=4")
	url := newServer(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(30 * time.Millisecond)
		w.WriteHeader(200)
	})
	var ids []string
	for i := 0; i < 120; i++ {
		ids = append(ids, s.submit(t, fmt.Sprintf(`{"url":%q}`, url+"/scale")))
	}
	for _, id := range ids {
		s.waitTerminal(t, id, 30*time.Second)
	}
	for _, w := range s.workers {
		b, _ := os.ReadFile(w.log)
		n := strings.Count(string(b), `"msg":"attempt"`)
		if n == 0 {
			t.Errorf("%s performed no attempt", w.name)
		}
		t.Logf("%s performed %d attempts", w.name, n)
	}
}
