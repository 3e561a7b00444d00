package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/faultpoint"
)

// fanOutTopic makes topic name of n endpoints on dest (paths /<name>/1 …)
// and returns their paths.
func fanOutTopic(t *testing.T, s *stack, dest *destination, name string, n int) []string {
	t.Helper()
	var paths, eps []string
	for i := 1; i <= n; i++ {
		p := fmt.Sprintf("/%s/%d", name, i)
		paths = append(paths, p)
		eps = append(eps, fmt.Sprintf(`{"url":%q}`, dest.script(p, 200)))
	}
	if a := call(t, "POST", s.api+"/topics/"+name+"/endpoints", `{"endpoints":[`+strings.Join(eps, ",")+`]}`); a.status != 200 {
		t.Fatalf("add endpoints: %d %s", a.status, a.raw)
	}
	return paths
}

// waitHitOnce waits until every path was called, then checks each was
// called exactly once.
func waitHitOnce(t *testing.T, dest *destination, paths []string) {
	t.Helper()
	waitFor(t, 30*time.Second, "every endpoint to be called", func() bool {
		for _, p := range paths {
			if len(dest.calls(p)) == 0 {
				return false
			}
		}
		return true
	})
	for _, p := range paths {
		if n := len(dest.calls(p)); n != 1 {
			t.Errorf("%s was called %d times, want 1", p, n)
		}
	}
}

// A publish cut short by the tenant's cap of unfinished requests says
// which endpoints got nothing, and the same call again with the same
// Idempotency-Key makes those (and only those); another body with that
// key is a conflict.
func TestFanOutCutShortIsResumed(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1, "MAX_UNFINISHED_PER_KEY=5")
	dest := newDestination(t)
	// The destination holds its calls until released, so the first five
	// requests stay unfinished and the cap cuts the publish short.
	release := make(chan struct{})
	held := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		dest.Config.Handler.ServeHTTP(w, r)
	})
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	var eps, paths []string
	for i := 1; i <= 8; i++ {
		p := fmt.Sprintf("/cut/%d", i)
		paths = append(paths, p)
		eps = append(eps, fmt.Sprintf(`{"url":%q}`, held+p))
	}
	if a := call(t, "POST", s.api+"/topics/cut/endpoints", `{"endpoints":[`+strings.Join(eps, ",")+`]}`); a.status != 200 {
		t.Fatalf("add endpoints: %d %s", a.status, a.raw)
	}
	const body = `{"body":"order 7","maxRetries":0}`
	first := call(t, "POST", s.api+"/topics/cut/requests", body, "Idempotency-Key", "order-7")
	missing, _ := first.body["missingEndpoints"].([]any)
	pubID, _ := first.body["publicationId"].(string)
	if first.status != 429 || len(missing) != 3 || pubID == "" || !strings.Contains(first.raw, "5 of 8 endpoints got a request") {
		t.Fatalf("a publish cut short by the cap: %d %s, want 429 naming the 3 endpoints that got nothing", first.status, first.raw)
	}
	if a := call(t, "GET", s.api+"/publications/"+pubID, ""); a.status != 200 || len(a.body["requests"].([]any)) != 5 {
		t.Errorf("the cut-short publication: %d %s, want its 5 requests", a.status, a.raw)
	}
	close(release)
	waitFor(t, 30*time.Second, "the first five to be delivered", func() bool {
		a := call(t, "GET", s.api+"/publications/"+pubID, "")
		counts, _ := a.body["counts"].(map[string]any)
		return counts != nil && counts["completed"] == 5.0
	})
	if a := call(t, "POST", s.api+"/topics/cut/requests", `{"body":"order 8","maxRetries":0}`, "Idempotency-Key", "order-7"); a.status != 409 {
		t.Errorf("the key with another body: %d %s, want 409", a.status, a.raw)
	}
	again := call(t, "POST", s.api+"/topics/cut/requests", body, "Idempotency-Key", "order-7")
	if again.status != 202 || again.body["id"] != pubID || len(again.body["requests"].([]any)) != 8 {
		t.Fatalf("the same publish again: %d %s, want 202 completing publication %s", again.status, again.raw, pubID)
	}
	waitHitOnce(t, dest, paths)
	third := call(t, "POST", s.api+"/topics/cut/requests", body, "Idempotency-Key", "order-7")
	if third.status != 200 || third.header.Get("Idempotent-Replayed") != "true" || third.body["id"] != pubID {
		t.Errorf("a complete publish again: %d %s, want a 200 replay", third.status, third.raw)
	}
	if t.Failed() {
		return
	}
	for _, p := range paths {
		if n := len(dest.calls(p)); n != 1 {
			t.Errorf("after the replay %s was called %d times, want 1", p, n)
		}
	}
}

// Concurrent publishes with one Idempotency-Key make one publication and
// all answer it, never 404.
func TestFanOutConcurrentCallsShareOnePublication(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	dest := newDestination(t)
	paths := fanOutTopic(t, s, dest, "busy", 10)
	const calls = 30
	answers := make([]answer, calls)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i] = call(t, "POST", s.api+"/topics/busy/requests", `{"body":"x"}`, "Idempotency-Key", "same")
		}()
	}
	wg.Wait()
	ids := map[any]int{}
	for _, a := range answers {
		if (a.status != 202 && a.status != 200) || len(a.body["requests"].([]any)) != 10 {
			t.Errorf("a concurrent publish: %d %s, want 200 or 202 with the 10 requests", a.status, a.raw)
		}
		ids[a.body["id"]]++
	}
	if len(ids) != 1 {
		t.Errorf("%d publications for one key: %v", len(ids), ids)
	}
	waitHitOnce(t, dest, paths)
}

// A publish whose API dies between claiming its Idempotency-Key and making
// its requests leaves a key that the same call completes, not one that
// answers 404.
func TestFanOutCrashAfterClaimIsResumed(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1, faultpoint.EnvVar+"="+faultpoint.AfterPublicationClaim)
	dest := newDestination(t)
	paths := fanOutTopic(t, s, dest, "crash", 4)
	req, _ := http.NewRequest("POST", s.api+"/topics/crash/requests", strings.NewReader(`{"body":"y"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "k1")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("the API answered %d, want it to die after the claim", resp.StatusCode)
	}
	s.restartAPI(t)
	again := call(t, "POST", s.api+"/topics/crash/requests", `{"body":"y"}`, "Idempotency-Key", "k1")
	if again.status != 202 || len(again.body["requests"].([]any)) != 4 {
		t.Fatalf("the same publish after the crash: %d %s, want 202 with 4 requests", again.status, again.raw)
	}
	if a := call(t, "GET", s.api+"/publications/"+again.body["id"].(string), ""); a.status != 200 {
		t.Errorf("the resumed publication: %d %s", a.status, a.raw)
	}
	waitHitOnce(t, dest, paths)
}

// The same through the official QStash client: a URL group publish cut
// short names the endpoints that got nothing, and the same publish with
// the same deduplication id completes it (e2e/oracles/qstash-fanout.test.js).
func TestOfficialQStashClientResumesAGroupPublish(t *testing.T) {
	t.Parallel()
	const token = "fanout-token"
	s := startStack(t, 1, "API_KEYS="+token, "MAX_UNFINISHED_PER_KEY=5")
	nodeTest(t, "qstash-fanout.test.js", "RETRYD_URL="+s.api, "RETRYD_TOKEN="+token)
}
