package e2e

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// keyDestination counts deliveries per Idempotency-Key.
func keyDestination(t *testing.T) (string, func() map[string]int) {
	var mu sync.Mutex
	seen := map[string]int{}
	url := newServer(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(200)
	})
	return url, func() map[string]int {
		mu.Lock()
		defer mu.Unlock()
		out := map[string]int{}
		for k, v := range seen {
			out[k] = v
		}
		return out
	}
}

// fireTimes lists the distinct ticks that made requests for schedule id,
// failing on a tick that made more than one.
func (s *stack) scheduledRequests(t *testing.T, id string) []time.Time {
	t.Helper()
	perKey := map[string]int{}
	a := call(t, "GET", s.api+"/requests?limit=500", "")
	for _, d := range a.body["data"].([]any) {
		k, _ := d.(map[string]any)["idempotencyKey"].(string)
		if strings.HasPrefix(k, "schedule:"+id+":") {
			perKey[k]++
		}
	}
	var ticks []time.Time
	for k, n := range perKey {
		if n != 1 {
			t.Errorf("tick %s made %d requests, want 1", k, n)
		}
		ft, err := time.Parse(time.RFC3339, strings.TrimPrefix(k, "schedule:"+id+":"))
		if err != nil {
			t.Fatalf("key %q: %v", k, err)
		}
		ticks = append(ticks, ft)
	}
	sort.Slice(ticks, func(i, j int) bool { return ticks[i].Before(ticks[j]) })
	return ticks
}

// Three scheduler replicas (one per worker) serve an every-second schedule;
// one is SIGKILLed mid-run. Every tick makes exactly one request, with no
// gap and no double, and the destination sees one delivery per tick. Not
// parallel: a tick starved of CPU for over 2 s by the soak tests would
// count as missed.
func TestScheduleFiresOncePerTickAcrossReplicas(t *testing.T) {
	s := startStack(t, 3, "SWEEP_INTERVAL=1s")
	url, deliveries := keyDestination(t)
	a := call(t, "POST", s.api+"/schedules", fmt.Sprintf(`{"cron":"@every 1s","request":{"url":%q,"method":"POST","body":"tick"}}`, url+"/tick"))
	if a.status != 201 {
		t.Fatalf("create schedule: %d %s", a.status, a.raw)
	}
	id := a.body["id"].(string)
	time.Sleep(3 * time.Second)
	victim := s.workers[0]
	_ = victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	time.Sleep(4 * time.Second)
	if p := call(t, "POST", s.api+"/schedules/"+id+"/pause", ""); p.status != 200 || p.body["paused"] != true {
		t.Fatalf("pause: %d %s", p.status, p.raw)
	}
	ticks := s.scheduledRequests(t, id)
	if len(ticks) < 5 {
		t.Fatalf("%d ticks fired in ~7 s, want at least 5", len(ticks))
	}
	for i := 1; i < len(ticks); i++ {
		if d := ticks[i].Sub(ticks[i-1]); d != time.Second {
			t.Errorf("ticks %v and %v are %v apart: a gap or a double", ticks[i-1], ticks[i], d)
		}
	}
	// A tick's request the killed worker held comes back once its lease
	// has gone 15 s unextended and a sweep finds it.
	waitFor(t, 45*time.Second, "all ticks delivered", func() bool { return len(deliveries()) >= len(ticks) })
	for k, n := range deliveries() {
		if n != 1 {
			t.Errorf("%s delivered %d times", k, n)
		}
	}
	doc := call(t, "GET", s.api+"/schedules/"+id, "")
	if fires := doc.body["lastFires"].([]any); len(fires) != len(ticks) {
		t.Errorf("schedule shows %d last fires, %d ticks made requests", len(fires), len(ticks))
	}
}

func TestScheduleLifecycle(t *testing.T) {
	t.Parallel()
	s := startStack(t, 1)
	url, deliveries := keyDestination(t)
	for body, field := range map[string]string{
		`{"cron":"61 * * * *","request":{"url":"https://e.com"}}`:                          "cron",
		`{"cron":"","request":{"url":"https://e.com"}}`:                                    "cron",
		`{"cron":"@every 1s","timezone":"Mars/Olympus","request":{"url":"https://e.com"}}`: "timezone",
		`{"cron":"@every 1s","catchUp":"all","request":{"url":"https://e.com"}}`:           "catchUp",
		`{"cron":"@every 1s"}`:                                               "request",
		`{"cron":"@every 1s","request":{"url":"ftp://e.com"}}`:               "request.url",
		`{"cron":"@every 1s","request":{"url":"https://e.com","delayMs":5}}`: "request.delayMs",
	} {
		a := call(t, "POST", s.api+"/schedules", body)
		if e, _ := a.body["error"].(map[string]any); a.status != 400 || e["field"] != field {
			t.Errorf("%s: %d %s, want 400 naming %s", body, a.status, a.raw, field)
		}
	}
	a := call(t, "POST", s.api+"/schedules", fmt.Sprintf(`{"cron":"@every 1s","request":{"url":%q}}`, url+"/life"))
	id := a.body["id"].(string)
	if a.status != 201 || len(a.body["nextFireTimes"].([]any)) != 5 || a.header.Get("Location") != "/schedules/"+id {
		t.Fatalf("create: %d %s", a.status, a.raw)
	}
	waitFor(t, 5*time.Second, "a first fire", func() bool { return len(deliveries()) >= 1 })
	call(t, "POST", s.api+"/schedules/"+id+"/pause", "")
	time.Sleep(300 * time.Millisecond) // a tick being processed finishes
	paused := len(deliveries())
	time.Sleep(2500 * time.Millisecond)
	if n := len(deliveries()); n != paused {
		t.Errorf("a paused schedule fired %d more times", n-paused)
	}
	r := call(t, "POST", s.api+"/schedules/"+id+"/resume", "")
	if r.status != 200 || r.body["paused"] != false {
		t.Fatalf("resume: %d %s", r.status, r.raw)
	}
	waitFor(t, 5*time.Second, "fires after resume", func() bool { return len(deliveries()) > paused })
	// Resuming did not replay the ~2.5 s of ticks missed while paused.
	if n := len(deliveries()); n > paused+2 {
		t.Errorf("resume replayed missed ticks: %d new fires at once", n-paused)
	}
	if l := call(t, "GET", s.api+"/schedules", ""); len(l.body["data"].([]any)) != 1 {
		t.Errorf("list: %s", l.raw)
	}
	if d := call(t, "DELETE", s.api+"/schedules/"+id, ""); d.status != 200 {
		t.Errorf("delete: %d", d.status)
	}
	time.Sleep(300 * time.Millisecond)
	deleted := len(deliveries())
	time.Sleep(1500 * time.Millisecond)
	if n := len(deliveries()); n != deleted {
		t.Errorf("a deleted schedule fired %d more times", n-deleted)
	}
	if g := call(t, "GET", s.api+"/schedules/"+id, ""); g.status != 404 {
		t.Errorf("GET deleted schedule: %d", g.status)
	}
}

// After downtime (no scheduler ran for 35 s), catchUp "last" fires the
// latest missed tick once; "none" fires nothing until the next tick.
func TestScheduleCatchUpAfterDowntime(t *testing.T) {
	t.Parallel()
	s := startStack(t, 0)
	url, _ := keyDestination(t)
	ids := map[string]string{}
	for _, mode := range []string{"none", "last"} {
		a := call(t, "POST", s.api+"/schedules", fmt.Sprintf(`{"cron":"@every 10s","catchUp":%q,"request":{"url":%q}}`, mode, url))
		if a.status != 201 {
			t.Fatalf("create: %d %s", a.status, a.raw)
		}
		ids[mode] = a.body["id"].(string)
	}
	// Simulate downtime: both schedules were due 35 s ago (ticks at -35, -25,
	// -15 and -5 s: all missed, none due right now).
	rdb := s.redis.Client()
	past := time.Now().Add(-35 * time.Second).UnixMilli()
	for _, id := range ids {
		rdb.HSet(context.Background(), "{retryd}:sch:"+id, "nextFireAt", past)
		rdb.ZAdd(context.Background(), "{retryd}:sch-due", redisZ(float64(past), id))
	}
	s.startWorker(t)
	waitFor(t, 10*time.Second, "the schedules to be advanced", func() bool {
		for _, id := range ids {
			next := call(t, "GET", s.api+"/schedules/"+id, "").body["nextFireTimes"].([]any)
			ts, _ := time.Parse(time.RFC3339, next[0].(string))
			if ts.Before(time.Now()) {
				return false
			}
		}
		return true
	})
	if n := len(s.scheduledRequests(t, ids["none"])); n != 0 {
		t.Errorf("catchUp none fired %d missed ticks", n)
	}
	ticks := s.scheduledRequests(t, ids["last"])
	if len(ticks) != 1 {
		t.Fatalf("catchUp last fired %d ticks, want exactly 1", len(ticks))
	}
	if age := time.Since(ticks[0]); age < 0 || age > 12*time.Second {
		t.Errorf("catch-up fired tick %v, want the latest missed one", ticks[0])
	}
}

func redisZ(score float64, member string) redis.Z { return redis.Z{Score: score, Member: member} }
