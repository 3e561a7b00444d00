package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/redistest"
)

// failoverPlan is what one failover run does.
type failoverPlan struct {
	run, wait int           // run number; REDIS_WAIT_REPLICAS
	cut       time.Duration // how long the API, then a worker, are cut off from Redis
	settle    time.Duration // load between two faults
	clients   int           // concurrent submitters
	pace      time.Duration // each submitter's pause between submissions
	drain     time.Duration // how long acknowledged requests may take to finish
}

// TestFailover is the proof of delivery under failover behind `make
// chaos-failover` (FAILOVER_RUNS=5 runs with REDIS_WAIT_REPLICAS=1, then 5
// with 0, 10 s cuts); the normal suite runs one short run with wait=1.
// Real processes: a primary, a replica and three sentinels; the API and
// two workers on REDIS_SENTINEL_ADDRS, the API and one worker behind
// proxies the test can cut. Under a steady submit load the primary is
// SIGKILLed (Sentinel promotes the replica; the old primary comes back as
// its replica), then the API's and a worker's connections to Redis are
// cut. Every acknowledged submission must end terminal, created once;
// every acknowledged cancel and redrive must hold.
func TestFailover(t *testing.T) {
	t.Parallel()
	plans := []failoverPlan{{run: 1, wait: 1, cut: 2 * time.Second, settle: time.Second, clients: 4, pace: 20 * time.Millisecond, drain: 90 * time.Second}}
	if v := os.Getenv("FAILOVER_RUNS"); v != "" {
		runs, err := strconv.Atoi(v)
		if err != nil || runs < 1 {
			t.Fatalf("FAILOVER_RUNS=%q", v)
		}
		plans = nil
		for _, w := range waitsToRun(t) {
			for r := 1; r <= runs; r++ {
				plans = append(plans, failoverPlan{run: r, wait: w, cut: 10 * time.Second, settle: 3 * time.Second,
					clients: 8, pace: 10 * time.Millisecond, drain: 3 * time.Minute})
			}
		}
	}
	for _, p := range plans {
		t.Run(fmt.Sprintf("wait=%d/run=%d", p.wait, p.run), func(t *testing.T) {
			res := runFailover(t, p)
			fmt.Println(res.line(p))
			res.assert(t, p)
		})
	}
}

// waitsToRun are the REDIS_WAIT_REPLICAS values of a full run
// (FAILOVER_WAITS, default "1,0").
func waitsToRun(t *testing.T) []int {
	v := os.Getenv("FAILOVER_WAITS")
	if v == "" {
		v = "1,0"
	}
	var waits []int
	for _, f := range strings.Split(v, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			t.Fatalf("FAILOVER_WAITS=%q", v)
		}
		waits = append(waits, w)
	}
	return waits
}

// runFailover runs one plan and checks its ledger against the records.
func runFailover(t *testing.T, p failoverPlan) *failoverResult {
	sn := redistest.StartSentinels(t, 3)
	apiLink, workerLink := sn.Proxies(t), sn.Proxies(t)
	sentinel := func(addrs []string) []string {
		return []string{"REDIS_SENTINEL_ADDRS=" + strings.Join(addrs, ","), "REDIS_SENTINEL_MASTER=" + sn.MasterName}
	}
	common := []string{fmt.Sprintf("REDIS_WAIT_REPLICAS=%d", p.wait), "SWEEP_INTERVAL=1s", "WORKER_CONCURRENCY=20"}
	s := startStackFull(t, sn.Master, 0, append(append([]string{"ALLOW_PRIVATE_TARGETS=true"}, common...), sentinel(apiLink.SentinelAddrs)...),
		append(append([]string{"ALLOW_PRIVATE_TARGETS=true"}, common...), sentinel(sn.SentinelAddrs)...))
	s.startWorker(t)
	s.startWorker(t, sentinel(workerLink.SentinelAddrs)...)

	l := newLedger()
	dest := l.destination(t)
	var stop atomic.Bool
	var next atomic.Int64
	var wg sync.WaitGroup
	for c := 0; c < p.clients; c++ {
		wg.Add(1)
		go func() { defer wg.Done(); l.submitter(s.api, dest, &next, p.pace, &stop) }()
	}
	defer func() { stop.Store(true); wg.Wait(); l.ops.Wait() }()
	res := &failoverResult{}
	waitFor(t, 30*time.Second, "the first acknowledged submissions", func() bool { return l.ackCount() >= 20 })

	killPrimary(t, sn, l, res)
	time.Sleep(p.settle) // load between faults, not a synchronisation

	apiLink.Cut()
	time.Sleep(p.cut)
	healed := time.Now()
	apiLink.Heal()
	waitFor(t, time.Minute, "a submission acknowledged after the API's cut", func() bool { return !l.ackedAfter(healed).IsZero() })
	res.cutAPI = l.ackedAfter(healed).Sub(healed)
	time.Sleep(p.settle)

	workerLink.Cut()
	time.Sleep(p.cut)
	healed = time.Now()
	workerLink.Heal()
	waitFor(t, time.Minute, "the cut worker to hear from Redis again", func() bool { return workerLink.LastReply().After(healed) })
	res.cutWorker = time.Since(healed)
	time.Sleep(p.settle)

	stop.Store(true)
	wg.Wait()
	l.ops.Wait() // the redrives under way end before the records are read
	res.failovers = sn.Failovers(sn.SentinelAddrs[0])
	res.check(t, s, l, p.drain)
	return res
}

// killPrimary SIGKILLs the primary, waits for Sentinel to promote the
// replica, restarts the old primary (Sentinel makes it the new replica, so
// WAIT 1 can be met again) and notes the time from the kill until the
// promotion, until the old primary is back as a replica, and until
// submissions are acknowledged and delivered again.
func killPrimary(t *testing.T, sn *redistest.Sentinel, l *ledger, res *failoverResult) {
	t.Helper()
	killed := time.Now()
	res.killedAt = killed
	sn.Master.Kill()
	waitFor(t, time.Minute, "Sentinel to promote the replica", func() bool { return sn.MasterAddr(sn.SentinelAddrs[0]) == sn.Replica.Addr })
	res.promoted = time.Since(killed)
	sn.Master.Restart()
	waitFor(t, 2*time.Minute, "the old primary back as a replica", func() bool { return replicaOnline(sn) })
	res.rejoined = time.Since(killed)
	waitFor(t, 2*time.Minute, "submissions acknowledged and delivered after the failover", func() bool {
		return !l.ackedAfter(killed).IsZero() && !l.deliveredAfter(killed).IsZero()
	})
	a, d := l.ackedAfter(killed), l.deliveredAfter(killed)
	if d.After(a) {
		a = d
	}
	res.recover = a.Sub(killed)
}

// replicaOnline says whether the master Sentinel names has a replica
// whose link is up (on a loaded machine Sentinel may fail over twice, so
// it need not be the node first promoted).
func replicaOnline(sn *redistest.Sentinel) bool {
	_, port, ok := strings.Cut(sn.MasterAddr(sn.SentinelAddrs[0]), ":")
	if !ok {
		return false
	}
	out, _ := exec.Command("redis-cli", "-p", port, "info", "replication").Output()
	return strings.Contains(string(out), "role:master") && strings.Contains(string(out), "state=online")
}

// A submission whose write the replica does not confirm answers 503 with
// Retry-After and leaves nothing behind: the same Idempotency-Key retried
// once the replica answers creates the request (202, not a replay), once.
// A replay that cannot be confirmed is 503 too and keeps the earlier
// request.
func TestUnconfirmedSubmissionIs503AndRetriesOnce(t *testing.T) {
	t.Parallel()
	sn := redistest.StartSentinels(t, 1)
	s := startStackOn(t, sn.Master, 1, "REDIS_SENTINEL_ADDRS="+sn.SentinelAddr, "REDIS_SENTINEL_MASTER="+sn.MasterName,
		"REDIS_WAIT_REPLICAS=1", "SWEEP_INTERVAL=1s")
	dest := newDestination(t)
	body := fmt.Sprintf(`{"url":%q}`, dest.script("/once", 200))
	// The replica first syncs with its primary; on a loaded machine a
	// submission may not be confirmed until it has.
	waitFor(t, 30*time.Second, "the replica to confirm a submission", func() bool {
		return call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q}`, dest.script("/warm-up", 200)), "Idempotency-Key", "warm-up").status/100 == 2
	})

	first := call(t, "POST", s.api+"/requests", body, "Idempotency-Key", "earlier")
	if first.status != 202 {
		t.Fatalf("submission with the replica up: %d %s", first.status, first.raw)
	}
	replica := sn.Replica.Pid()
	if err := syscall.Kill(replica, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(replica, syscall.SIGCONT) })
	for _, key := range []string{"new", "earlier"} {
		a := call(t, "POST", s.api+"/requests", body, "Idempotency-Key", key)
		if a.status != 503 || a.header.Get("Retry-After") == "" {
			t.Errorf("%s key with the replica stopped: %d Retry-After %q %s; want 503 with Retry-After", key, a.status, a.header.Get("Retry-After"), a.raw)
		}
	}
	if err := syscall.Kill(replica, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}

	var again answer
	waitFor(t, 30*time.Second, "a submission confirmed again", func() bool {
		again = call(t, "POST", s.api+"/requests", body, "Idempotency-Key", "new")
		return again.status != 503
	})
	if again.status != 202 {
		t.Errorf("the key whose submission was answered 503, retried: %d %s; want 202 (nothing was claimed)", again.status, again.raw)
	}
	if a := call(t, "POST", s.api+"/requests", body, "Idempotency-Key", "earlier"); a.status != 200 || a.body["id"] != first.body["id"] {
		t.Errorf("the earlier key replayed: %d %v; want 200 naming %v", a.status, a.body["id"], first.body["id"])
	}
	waitFor(t, 20*time.Second, "both requests delivered", func() bool { return len(dest.calls("/once")) >= 2 })
	s.waitTerminal(t, again.body["id"].(string), 20*time.Second)
	seen := map[string]int{}
	for _, h := range dest.calls("/once") {
		seen[h.header.Get("Idempotency-Key")]++
	}
	if seen["new"] != 1 || seen["earlier"] != 1 {
		t.Errorf("deliveries by Idempotency-Key: %v; want new and earlier once each", seen)
	}
}
