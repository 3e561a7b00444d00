package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// failoverResult is the checker's verdict on one failover run.
type failoverResult struct {
	acknowledged int
	lost         int // acknowledged, and the record is gone
	lostSeen     int // of those, ones the destination heard of all the same
	stuck        int // acknowledged, and not terminal when the drain ended
	duplicates   int // requests the destination answered 2xx more than once
	afterFinal   int // calls by an attempt the record does not count that reached the destination after it said completed or canceled
	twice        int // Idempotency-Keys that became two requests
	replayed     int // final replays of an acknowledged key that named another id or none
	// canceled: DELETEs answered 200; uncanceled: of those, requests whose
	// record ended otherwise; calledAfterCancel: requests the destination
	// heard of after their DELETE was answered, by an attempt the record
	// does not count (one begun before the cancel, still on its way, is
	// not a fault).
	canceled, uncanceled, calledAfterCancel int
	// redriven: redrives answered 202; unredriven: of those, requests
	// whose record did not end completed after a redrive, or that the
	// destination did not hear of after it.
	redriven, unredriven int
	// recover: from the SIGKILL until submissions are acknowledged and
	// delivered again; cutAPI, cutWorker: from the end of a cut until the
	// API acknowledges again / the worker hears from Redis again.
	recover, cutAPI, cutWorker time.Duration
	// promoted, rejoined: from the SIGKILL until Sentinel named the
	// replica master, and until the old primary was its replica.
	promoted, rejoined time.Duration
	// failovers Sentinel made (more than one: it also failed over on its
	// own, e.g. a loaded machine made a node miss down-after-milliseconds).
	failovers int
	// killedAt is the SIGKILL; lostFrom, lostTo: when the lost requests'
	// acknowledged submissions were sent, relative to it.
	killedAt                  time.Time
	lostFrom, lostTo          time.Duration
	unavailable, noRetryAfter int
	unexpected                []string
	dropped, abandoned        int
	lostIDs, stuckIDs         []string
}

// afterFinalSlack is how long after a record's end (completedAt, or a
// cancel's answer) a call by an attempt the record does not count may
// still reach the destination: the record and the destination's ledger
// read the time apart.
const afterFinalSlack = 250 * time.Millisecond

// lateUncounted says whether call h reached the destination past the
// slack after end, by an attempt the record (begun attempts) does not
// count.
func lateUncounted(h destHit, end time.Time, begun float64) bool {
	return h.at.After(end.Add(afterFinalSlack)) && h.n > int(begun)
}

// check waits up to drain for every acknowledged request to end, then
// compares the ledger with the records.
func (res *failoverResult) check(t *testing.T, s *stack, l *ledger, drain time.Duration) {
	t.Helper()
	l.mu.Lock()
	acked := make(map[string]string, len(l.acked))
	for k, id := range l.acked {
		acked[k] = id
	}
	res.acknowledged, res.twice = len(acked), len(l.twice)
	res.unavailable, res.noRetryAfter, res.unexpected = l.unavailable, l.noRetryAfter, l.unexpected
	res.dropped, res.abandoned = l.dropped, l.abandoned
	l.mu.Unlock()

	docs := map[string]map[string]any{}
	deadline := time.Now().Add(drain)
	for {
		res.lostIDs, res.stuckIDs = nil, nil
		for _, id := range acked {
			if d := docs[id]; d != nil && terminal(d) {
				continue
			}
			a, err := tryCall("GET", s.api+"/requests/"+id, "")
			switch {
			case err == nil && a.status == 404:
				res.lostIDs = append(res.lostIDs, id)
			case err != nil || a.status != 200 || !terminal(a.body):
				res.stuckIDs = append(res.stuckIDs, id)
			default:
				docs[id] = a.body
			}
		}
		if len(res.stuckIDs) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	res.lost, res.stuck = len(res.lostIDs), len(res.stuckIDs)

	l.mu.Lock()
	for i, id := range res.lostIDs {
		if len(l.hits[id]) > 0 {
			res.lostSeen++
		}
		at := l.sent[id].Sub(res.killedAt)
		if i == 0 || at < res.lostFrom {
			res.lostFrom = at
		}
		if i == 0 || at > res.lostTo {
			res.lostTo = at
		}
	}
	res.checkCalls(l, docs, t.Logf)
	res.checkControls(l, docs, t.Logf)
	for key, ids := range l.keyIDs {
		if len(ids) > 1 {
			res.twice++
			for id := range ids {
				t.Logf("Idempotency-Key %s became %d requests: %s (acknowledged as %s) calls %d, sent %v",
					key, len(ids), id, acked[key], len(l.hits[id]), l.sent[id])
			}
		}
	}
	bodies := make(map[string]string, len(l.bodies))
	for k, b := range l.bodies {
		bodies[k] = b
	}
	l.mu.Unlock()
	res.replayed = replayAll(s.api, acked, bodies)
}

// checkCalls compares the destination's calls with the records (docs, the
// terminal ones by id): requests answered 2xx more than once, and calls
// after a record ended; l.mu is held.
func (res *failoverResult) checkCalls(l *ledger, docs map[string]map[string]any, logf func(string, ...any)) {
	for id, hs := range l.hits {
		oks := 0
		for _, h := range hs {
			if h.ok {
				oks++
			}
		}
		if oks > 1 {
			res.duplicates++
		}
		if d := docs[id]; d != nil {
			if done, err := time.Parse(time.RFC3339Nano, fmt.Sprint(d["completedAt"])); err == nil {
				// An attempt the record counts began before it ended: on
				// two busy cores its call may arrive any time later.
				begun, _ := d["attemptCount"].(float64)
				for _, h := range hs {
					if lateUncounted(h, done, begun) {
						res.afterFinal++
						logf("%s reached the destination %v after its record ended %v", id, h.at.Sub(done), d["status"])
					}
				}
			}
		}
	}
}

// checkControls compares the acknowledged cancels and redrives with the
// records (docs, the terminal ones by id) and the destination's calls;
// l.mu is held.
func (res *failoverResult) checkControls(l *ledger, docs map[string]map[string]any, logf func(string, ...any)) {
	res.canceled, res.redriven = len(l.canceled), len(l.redriven)
	for id, at := range l.canceled {
		d := docs[id]
		if d == nil {
			continue // lost or stuck: counted as such
		}
		if d["status"] != "canceled" {
			res.uncanceled++
			logf("%s: its DELETE answered 200, its record ended %v", id, d["status"])
		}
		begun, _ := d["attemptCount"].(float64)
		for _, h := range l.hits[id] {
			if lateUncounted(h, at, begun) {
				res.calledAfterCancel++
				logf("%s reached the destination %v after its DELETE answered 200", id, h.at.Sub(at))
				break
			}
		}
	}
	for id, sent := range l.redriven {
		d := docs[id]
		if d == nil {
			continue
		}
		called := false
		for _, h := range l.hits[id] {
			called = called || (h.ok && h.at.After(sent))
		}
		if rc, _ := d["redriveCount"].(float64); d["status"] != "completed" || rc < 1 || !called {
			res.unredriven++
			logf("%s: its redrive answered 202, its record ended %v with redriveCount %v, a successful call after it: %v", id, d["status"], d["redriveCount"], called)
		}
	}
}

// replayAll submits every acknowledged key once more: each must answer
// 200 naming the request its first acknowledgement named. It returns how
// many did not.
func replayAll(api string, acked, bodies map[string]string) int {
	type job struct{ key, id string }
	jobs := make(chan job)
	var bad int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				status, _, raw, err := post(api+"/requests", bodies[j.key], j.key, 15*time.Second)
				if err != nil || status != 200 || !containsID(raw, j.id) {
					mu.Lock()
					bad++
					mu.Unlock()
				}
			}
		}()
	}
	for k, id := range acked {
		jobs <- job{k, id}
	}
	close(jobs)
	wg.Wait()
	return bad
}

func containsID(raw []byte, id string) bool {
	return len(id) > 0 && len(raw) > 0 && string(raw) != "" && contains(string(raw), `"id":"`+id+`"`)
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func terminal(doc map[string]any) bool {
	switch doc["status"] {
	case "completed", "failed", "canceled":
		return true
	}
	return false
}

// line is the run's one-line summary.
func (res *failoverResult) line(p failoverPlan) string {
	return fmt.Sprintf("FAILOVER run=%d wait=%d acknowledged=%d lost=%d stuck=%d duplicates=%d recover_s=%.2f "+
		"failovers=%d promote_s=%.2f rejoin_s=%.2f cut_api_recover_s=%.2f cut_worker_recover_s=%.2f after_final=%d created_twice=%d replay_mismatch=%d lost_but_delivered=%d lost_sent_s=%.2f..%.2f "+
		"canceled=%d uncanceled=%d called_after_cancel=%d redriven=%d unredriven=%d "+
		"answers_503=%d no_retry_after=%d unexpected=%d dropped_mid_call=%d never_acknowledged=%d",
		p.run, p.wait, res.acknowledged, res.lost, res.stuck, res.duplicates, res.recover.Seconds(),
		res.failovers, res.promoted.Seconds(), res.rejoined.Seconds(), res.cutAPI.Seconds(), res.cutWorker.Seconds(), res.afterFinal, res.twice, res.replayed, res.lostSeen, res.lostFrom.Seconds(), res.lostTo.Seconds(),
		res.canceled, res.uncanceled, res.calledAfterCancel, res.redriven, res.unredriven,
		res.unavailable, res.noRetryAfter, len(res.unexpected), res.dropped, res.abandoned)
}

// assert fails the run on what retryd promises: with wait ≥ 1 nothing
// acknowledged is lost, and every acknowledged cancel and redrive holds;
// always, nothing is stuck, no key becomes two
// requests, nothing is delivered after its record ended, every 503 says
// when to retry, and no other error reaches a client.
func (res *failoverResult) assert(t errorer, p failoverPlan) {
	t.Helper()
	if p.wait >= 1 && res.lost != 0 {
		t.Errorf("wait=%d: %d acknowledged requests lost: %v", p.wait, res.lost, first(res.lostIDs, 10))
	}
	if res.stuck != 0 {
		t.Errorf("%d acknowledged requests not terminal after the drain: %v", res.stuck, first(res.stuckIDs, 10))
	}
	if p.wait >= 1 && (res.twice != 0 || res.replayed != 0) {
		t.Errorf("Idempotency-Keys that became two requests: %d; final replays naming another request: %d", res.twice, res.replayed)
	}
	if p.wait >= 1 && (res.uncanceled != 0 || res.calledAfterCancel != 0) {
		t.Errorf("acknowledged cancels undone: %d ended otherwise, %d called after the cancel's answer", res.uncanceled, res.calledAfterCancel)
	}
	if p.wait >= 1 && res.unredriven != 0 {
		t.Errorf("acknowledged redrives undone: %d did not complete after their redrive", res.unredriven)
	}
	if res.canceled == 0 || res.redriven == 0 {
		t.Errorf("%d cancels and %d redrives acknowledged: the run checked none of one kind", res.canceled, res.redriven)
	}
	if res.afterFinal != 0 {
		t.Errorf("%d calls by attempts begun after their record said completed or canceled reached the destination", res.afterFinal)
	}
	if res.noRetryAfter != 0 {
		t.Errorf("%d answers 503 without Retry-After", res.noRetryAfter)
	}
	if len(res.unexpected) != 0 {
		t.Errorf("%d answers neither 202, 200 nor 503: %v", len(res.unexpected), first(res.unexpected, 5))
	}
	if res.acknowledged < 20 {
		t.Errorf("only %d submissions acknowledged: too little load to show anything", res.acknowledged)
	}
}

// errorer is the part of testing.T assert reports to.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

func first(s []string, n int) []string { return s[:min(n, len(s))] }

// failures records what assert reports.
type failures struct{ msgs []string }

func (f *failures) Helper() {}
func (f *failures) Errorf(format string, args ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

// The checker fails a run whose acknowledged cancel or redrive was undone:
// a canceled request that completed, or was called by an attempt begun
// after the cancel; a redriven request that ended failed, or that no
// successful call followed.
func TestFailoverCheckerCatchesUndoneCancelsAndRedrives(t *testing.T) {
	t.Parallel()
	at := time.Now()
	late := at.Add(time.Second)
	good := func() (*ledger, map[string]map[string]any) {
		l := newLedger()
		l.canceled["c1"], l.redriven["r1"] = at, at
		l.hits["c1"] = []destHit{{at: at.Add(-time.Second), ok: true, n: 1}, {at: late, ok: true, n: 1}} // begun before the cancel
		l.hits["r1"] = []destHit{{at: at.Add(-time.Second), n: 1}, {at: late, ok: true, n: 2}}
		docs := map[string]map[string]any{
			"c1": {"status": "canceled", "attemptCount": 1.0},
			"r1": {"status": "completed", "attemptCount": 2.0, "redriveCount": 1.0},
		}
		return l, docs
	}
	plan := failoverPlan{wait: 1}
	for _, tc := range []struct {
		name  string
		undo  func(l *ledger, docs map[string]map[string]any)
		fails bool
	}{
		{"both held", func(*ledger, map[string]map[string]any) {}, false},
		{"a canceled request completed", func(_ *ledger, d map[string]map[string]any) { d["c1"]["status"] = "completed" }, true},
		{"an attempt begun after the cancel", func(l *ledger, _ map[string]map[string]any) {
			l.hits["c1"] = append(l.hits["c1"], destHit{at: late, ok: true, n: 2})
		}, true},
		{"a redriven request ended failed", func(_ *ledger, d map[string]map[string]any) {
			d["r1"]["status"], d["r1"]["redriveCount"] = "failed", 0.0
		}, true},
		{"no call after the redrive", func(l *ledger, _ map[string]map[string]any) { l.hits["r1"] = l.hits["r1"][:1] }, true},
	} {
		l, docs := good()
		tc.undo(l, docs)
		res := &failoverResult{acknowledged: 20}
		res.checkControls(l, docs, func(string, ...any) {})
		var f failures
		res.assert(&f, plan)
		if (len(f.msgs) != 0) != tc.fails {
			t.Errorf("%s: the checker reported %q; want a failure: %v", tc.name, f.msgs, tc.fails)
		}
	}
}

// The checker counts a call after a record ended only when the record does
// not count its attempt: one it counts began before the end, and may
// arrive late on a busy machine.
func TestFailoverCheckerCountsCallsAfterTheEndByUncountedAttempts(t *testing.T) {
	t.Parallel()
	end := time.Now()
	late := end.Add(time.Second)
	for _, tc := range []struct {
		name  string
		hits  []destHit
		after int
	}{
		{"the counted attempt arrives late", []destHit{{at: late, ok: true, n: 2}}, 0},
		{"an attempt begun after the end", []destHit{{at: late, ok: true, n: 3}}, 1},
		{"an uncounted attempt within the slack", []destHit{{at: end.Add(afterFinalSlack / 2), n: 3}}, 0},
	} {
		l := newLedger()
		l.hits["c1"] = append([]destHit{{at: end.Add(-time.Second), n: 1}}, tc.hits...)
		docs := map[string]map[string]any{"c1": {"status": "canceled", "attemptCount": 2.0, "completedAt": end.Format(time.RFC3339Nano)}}
		res := &failoverResult{}
		res.checkCalls(l, docs, func(string, ...any) {})
		if res.afterFinal != tc.after {
			t.Errorf("%s: after_final %d, want %d", tc.name, res.afterFinal, tc.after)
		}
	}
}
