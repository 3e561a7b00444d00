package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/waiting/asynqx"
	"github.com/retryd/retryd/tasks"
)

// TestChaos is the soak run behind `make chaos` (CHAOS_REQUESTS=10000); the
// normal suite runs a short one. Real processes: Redis with AOF (fsync
// always), the API and 3 workers. The destination fails a random 30 % of
// calls and is slow for some; a random worker is SIGKILLed and restarted
// every few seconds, and Redis is SIGKILLed and restarted from its AOF once.
// Every acknowledged request must end terminal: lost = 0, non-terminal = 0.
func TestChaos(t *testing.T) {
	t.Parallel()
	n := 300
	if v := os.Getenv("CHAOS_REQUESTS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatalf("CHAOS_REQUESTS=%q", v)
		}
	}
	r := redistest.StartServer(t, redistest.Options{Persistent: true})
	s := startStackOn(t, r, 3, "SWEEP_INTERVAL=1s", "WORKER_CONCURRENCY=50")

	var mu sync.Mutex
	delivered := map[string]int{} // successful deliveries per Idempotency-Key
	var calls atomic.Int64
	dest := newServer(t, func(w http.ResponseWriter, req *http.Request) {
		calls.Add(1)
		if rand.IntN(20) == 0 {
			time.Sleep(time.Duration(200+rand.IntN(600)) * time.Millisecond)
		}
		if rand.IntN(10) < 3 {
			w.WriteHeader(503)
			return
		}
		mu.Lock()
		delivered[req.Header.Get("Idempotency-Key")]++
		mu.Unlock()
		w.WriteHeader(200)
	})

	start := time.Now()
	stop := make(chan struct{})
	chaosDone := make(chan struct{})
	var kills, redisKills atomic.Int32
	go func() {
		defer close(chaosDone)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(3 * time.Second):
			}
			w := rand.IntN(len(s.workers))
			p := s.workers[w]
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
			kills.Add(1)
			s.workers[w] = startProc(t, fmt.Sprintf("worker-restart-%d", i), bin.worker, s.workerEnv)
			if i == 1 {
				redisKills.Add(1)
				r.Kill()
				time.Sleep(500 * time.Millisecond)
				r.Restart()
			}
		}
	}()

	// Submit from 8 clients, spread over at least 15 s so the chaos hits
	// submissions too; a 503 (Redis down) is retried with the same
	// Idempotency-Key, so a request is never submitted twice.
	pace := 15 * time.Second * 8 / time.Duration(n)
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				body := fmt.Sprintf(`{"url":%q,"method":"POST","body":"job %d","maxRetries":12,"backoffMs":100,"maxBackoffMs":2000,"timeoutMs":5000}`, dest+"/job", i)
				if i%4 == 0 {
					// Flow control in use: a worker killed while it holds
					// one of these 8 slots must give it back (its lease).
					body = fmt.Sprintf(`{"url":%q,"method":"POST","body":"job %d","maxRetries":12,"backoffMs":100,"maxBackoffMs":2000,"timeoutMs":5000,"flowControl":{"key":"chaos","parallelism":8}}`, dest+"/job", i)
				}
				for attempt := 0; ; attempt++ {
					a, err := tryCall("POST", s.api+"/requests", body, "Idempotency-Key", fmt.Sprintf("chaos-%d", i))
					if err == nil && (a.status == 202 || a.status == 200) {
						ids[i] = a.body["id"].(string)
						break
					}
					if attempt > 600 {
						t.Errorf("submission %d never accepted: %v %v", i, err, a.status)
						return
					}
					time.Sleep(100 * time.Millisecond)
				}
				if rand.IntN(50) == 0 {
					_, _ = tryCall("DELETE", s.api+"/requests/"+ids[i], "")
				}
				time.Sleep(pace)
			}
		}()
	}
	wg.Wait()
	submitted := time.Since(start)
	// Keep the chaos going a little after the last submission.
	time.Sleep(5 * time.Second)
	close(stop)
	<-chaosDone

	var counts map[string]int
	deadline := time.Now().Add(3 * time.Minute)
	slowShown := false
	for {
		counts = map[string]int{}
		var unfinished []string
		for _, id := range ids {
			if id == "" {
				counts["lost"]++ // never acknowledged: counted, but not a loss of retryd's
				continue
			}
			a, err := tryCall("GET", s.api+"/requests/"+id, "")
			switch {
			case err != nil || a.status >= 500:
				counts["unknown"]++
			case a.status == 404:
				counts["lost"]++
			default:
				st := a.body["status"].(string)
				if st == "pending" || st == "retrying" {
					st = "non-terminal"
					unfinished = append(unfinished, a.raw)
				}
				counts[st]++
			}
		}
		if n := len(unfinished); !slowShown && n > 0 && n <= 10 && time.Since(start)-submitted > 45*time.Second {
			// A drain over its target: what the last ones wait for.
			slowShown = true
			for _, raw := range unfinished[:min(n, 3)] {
				fmt.Printf("CHAOS slow: %s\n", raw)
				fmt.Printf("CHAOS slow, its places: %s\n", placesOf(s, raw))
			}
		}
		if counts["non-terminal"]+counts["unknown"] == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	drain := time.Since(start) - submitted
	mu.Lock()
	dups := 0
	for _, k := range delivered {
		if k > 1 {
			dups++
		}
	}
	mu.Unlock()
	fmt.Printf("CHAOS submitted=%d completed=%d failed=%d canceled=%d non-terminal=%d lost=%d duplicates=%d "+
		"worker-kills=%d redis-kills=%d calls=%d submit-time=%s drain-time=%s\n",
		n, counts["completed"], counts["failed"], counts["canceled"], counts["non-terminal"], counts["lost"],
		dups, kills.Load(), redisKills.Load(), calls.Load(), submitted.Round(time.Millisecond), drain.Round(time.Millisecond))
	if counts["lost"] != 0 || counts["non-terminal"] != 0 || counts["unknown"] != 0 {
		t.Errorf("lost %d, non-terminal %d, unknown %d; want 0, 0, 0", counts["lost"], counts["non-terminal"], counts["unknown"])
		// What the unfinished ones look like, for the diagnosis.
		shown := 0
		for _, id := range ids {
			if a, err := tryCall("GET", s.api+"/requests/"+id, ""); err == nil && a.status == 200 && shown < 5 {
				if st := a.body["status"]; st == "pending" || st == "retrying" {
					shown++
					t.Logf("unfinished: %s", a.raw)
				}
			}
		}
		if f, err := tryCall("GET", s.api+"/flows", ""); err == nil {
			t.Logf("flows: %s", f.raw)
		}
	}
}

// tryCall is call without failing the test on a transport error (the API
// may be answering nothing while Redis restarts).
func tryCall(method, url, body string, headers ...string) (answer, error) {
	var a answer
	var err error
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%v", r)
			}
		}()
		a = call(nopTB{}, method, url, body, headers...)
	}()
	return a, err
}

// nopTB turns call's t.Fatalf into a panic that tryCall recovers.
type nopTB struct{ testing.TB }

func (nopTB) Helper()                      {}
func (nopTB) Fatalf(f string, args ...any) { panic(fmt.Sprintf(f, args...)) }
func (nopTB) Fatal(args ...any)            { panic(fmt.Sprint(args...)) }
func (nopTB) Errorf(f string, args ...any) {}
func (nopTB) Logf(string, ...any)          {}
func (nopTB) Cleanup(func())               {}
func (nopTB) TempDir() string              { return os.TempDir() }

// placesOf says where a slow request of the chaos run waits: its task in
// asynq, and its places in the flow-control key's lines.
func placesOf(s *stack, raw string) string {
	var doc struct{ ID string }
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		return err.Error()
	}
	rdb := redis.NewClient(&redis.Options{Addr: s.redis.Addr})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k := asynqx.QueueKeys(tasks.Queue)
	task := rdb.HGetAll(ctx, k.Task(doc.ID)).Val()
	delete(task, "msg")
	var fair []string
	for _, key := range rdb.Keys(ctx, "{retryd-flow:*}:line").Val() {
		if sc, err := rdb.ZScore(ctx, key, doc.ID).Result(); err == nil {
			fair = append(fair, fmt.Sprintf("%s@%.0f", key, sc))
		}
	}
	return fmt.Sprintf("id %s: in lines %v (cut line %v, places %v, turns %v), task %v, retry %v, scheduled %v, par wait %v of %d, par slots %v, lines listed %v",
		doc.ID, fair, keys.Flow("cut:chaos", "line"), rdb.ZScore(ctx, keys.Flow("cut:chaos", "places"), doc.ID).Val(),
		rdb.HGet(ctx, keys.Flow("cut:chaos", "turns"), doc.ID).Val(), task, rdb.ZScore(ctx, k.Retry(), doc.ID).Val(), rdb.ZScore(ctx, k.Scheduled(), doc.ID).Val(),
		rdb.ZScore(ctx, keys.Flow("chaos", "wait"), doc.ID).Val(), rdb.ZCard(ctx, keys.Flow("chaos", "wait")).Val(),
		rdb.ZRangeWithScores(ctx, keys.Flow("chaos", "slots"), 0, -1).Val(), rdb.HGetAll(ctx, keys.Lines).Val())
}
