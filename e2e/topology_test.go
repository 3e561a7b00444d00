package e2e

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retryd/retryd/internal/faultpoint"
	"github.com/retryd/retryd/internal/redistest"
)

// retryd on a 3-master Redis Cluster: every key of retryd and of its asynq
// queue carries the {retryd} hash tag, so each multi-key script stays in
// one slot.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	addrs := redistest.StartCluster(t, 3)
	r := redistest.StartServer(t, redistest.Options{}) // unused by the programs; keeps startStackOn's shape
	s := startStackOn(t, r, 2, "REDIS_CLUSTER_ADDRS="+strings.Join(addrs, ","), "SWEEP_INTERVAL=1s")
	clusterDeliveries(t, s)
	// The keys really are spread over the cluster's nodes: retryd's and
	// asynq's queue keys all sit in the slot of {retryd}.
	out, err := exec.Command("redis-cli", "-c", "-p", strings.Split(addrs[0], ":")[1], "cluster", "keyslot", "{retryd}:req:x").Output()
	if err != nil {
		t.Fatal(err)
	}
	slot := strings.TrimSpace(string(out))
	out2, _ := exec.Command("redis-cli", "-c", "-p", strings.Split(addrs[0], ":")[1], "cluster", "keyslot", "asynq:{retryd}:pending").Output()
	if slot != strings.TrimSpace(string(out2)) {
		t.Errorf("retryd's keys (slot %s) and asynq's queue keys (slot %s) are in different slots", slot, out2)
	}
}

// With PARTITIONS=6 on 3 masters, requests, their records and their asynq
// tasks spread over the cluster: every master holds between 20 % and 47 %
// of the keys, and lists, the DLQ, idempotency and schedules work across
// partitions as with one.
func TestPartitionsSpreadOverRedisCluster(t *testing.T) {
	t.Parallel()
	addrs := redistest.StartCluster(t, 3)
	r := redistest.StartServer(t, redistest.Options{}) // unused by the programs; keeps startStackOn's shape
	s := startStackOn(t, r, 2, "REDIS_CLUSTER_ADDRS="+strings.Join(addrs, ","), "PARTITIONS=6", "SWEEP_INTERVAL=1s")
	dest := newDestination(t)
	ok := dest.script("/spread", 200)

	const n = 3000
	var mu sync.Mutex
	var ids []string
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			for i := c; i < n; i += 8 {
				id := s.submit(t, fmt.Sprintf(`{"url":%q}`, ok))
				mu.Lock()
				ids = append(ids, id)
				mu.Unlock()
			}
		}(c)
	}
	wg.Wait()
	// Idempotency across partitions: the key picks one, the replay finds it.
	first := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q}`, ok), "Idempotency-Key", "spread-1")
	again := call(t, "POST", s.api+"/requests", fmt.Sprintf(`{"url":%q}`, ok), "Idempotency-Key", "spread-1")
	if first.status != 202 || again.status != 200 || again.body["id"] != first.body["id"] {
		t.Fatalf("idempotent pair: %d %v / %d %v", first.status, first.body["id"], again.status, again.body["id"])
	}
	failed := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script("/spread-bad", 410)))
	waitFor(t, 90*time.Second, "every request to complete", func() bool { return len(dest.calls("/spread")) >= n+1 })
	s.waitTerminal(t, failed, 20*time.Second)

	// The list walks all partitions newest first with one cursor.
	seen := map[string]bool{}
	prev := "~"
	cursor := ""
	for page := 0; page < 100; page++ {
		a := call(t, "GET", s.api+"/requests?limit=500&cursor="+cursor, "")
		for _, d := range a.body["data"].([]any) {
			id := d.(map[string]any)["id"].(string)
			if id >= prev || seen[id] {
				t.Fatalf("list order broken at %s after %s", id, prev)
			}
			seen[id], prev = true, id
		}
		next, _ := a.body["nextCursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}
	if len(seen) != n+2 {
		t.Errorf("the list holds %d requests, want %d", len(seen), n+2)
	}
	if dlq := s.dlqIDs(t, ""); len(dlq) != 1 || dlq[failed] == nil {
		t.Errorf("DLQ across partitions: %v", dlq)
	}
	if a := call(t, "POST", s.api+"/dlq/"+failed+"/redrive", `{"actor":"ops"}`); a.status != 202 {
		t.Errorf("redrive: %d %s", a.status, a.raw)
	}
	// A schedule fires in its partition.
	sch := call(t, "POST", s.api+"/schedules", fmt.Sprintf(`{"cron":"@every 1s","request":{"url":%q}}`, dest.script("/spread-tick", 200)))
	if sch.status != 201 {
		t.Fatalf("schedule: %d %s", sch.status, sch.raw)
	}
	waitFor(t, 10*time.Second, "a scheduled delivery", func() bool { return len(dest.calls("/spread-tick")) > 0 })

	// Keys per master.
	var total int
	counts := make([]int, len(addrs))
	for i, addr := range addrs {
		out, err := exec.Command("redis-cli", "-p", strings.Split(addr, ":")[1], "dbsize").Output()
		if err != nil {
			t.Fatal(err)
		}
		counts[i], _ = strconv.Atoi(strings.TrimSpace(string(out)))
		total += counts[i]
	}
	for i, c := range counts {
		share := float64(c) / float64(total)
		t.Logf("master %d holds %d of %d keys (%.1f %%)", i, c, total, 100*share)
		if share < 0.20 || share > 0.47 {
			t.Errorf("master %d holds %.1f %% of the keys, want 20–47 %%", i, 100*share)
		}
	}
}

// A worker killed mid-attempt on a partitioned cluster: its request's task
// is recovered in its own partition's queue, without using up the budget.
func TestWorkerCrashOnPartitionedCluster(t *testing.T) {
	t.Parallel()
	addrs := redistest.StartCluster(t, 3)
	r := redistest.StartServer(t, redistest.Options{}) // unused by the programs
	s := startStackOn(t, r, 0, "REDIS_CLUSTER_ADDRS="+strings.Join(addrs, ","), "PARTITIONS=6", "SWEEP_INTERVAL=1s")
	dest := newDestination(t)
	url := dest.script("/cluster-crash", 200)
	doomed := s.startWorker(t, faultpoint.EnvVar+"="+faultpoint.BeforeCall)
	var ids []string
	for i := 0; i < 12; i++ {
		ids = append(ids, s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, url)))
	}
	select {
	case <-doomed.done:
	case <-time.After(20 * time.Second):
		t.Fatal("the worker did not die")
	}
	s.startWorker(t)
	interrupted := 0
	for _, id := range ids {
		doc := s.waitTerminal(t, id, crashRecovery)
		if doc["status"] != "completed" {
			t.Errorf("%s ended %v (lastError %v)", id, doc["status"], doc["lastError"])
		}
		for _, a := range doc["attempts"].([]any) {
			if a.(map[string]any)["outcome"] == "interrupted" {
				interrupted++
			}
		}
	}
	if interrupted == 0 {
		t.Error("no attempt was recorded as interrupted: the worker did not die mid-attempt")
	}
}

// clusterDeliveries drives a stack on a cluster through deliveries with
// retries, a failure, the DLQ, a redrive and /metrics.
func clusterDeliveries(t *testing.T, s *stack) {
	t.Helper()
	dest := newDestination(t)
	url := dest.script("/cluster", 503, 200)
	var ids []string
	for i := 0; i < 20; i++ {
		ids = append(ids, s.submit(t, fmt.Sprintf(`{"url":%q,"backoffMs":100}`, url), "Idempotency-Key", fmt.Sprintf("c-%d", i)))
	}
	failed := s.submit(t, fmt.Sprintf(`{"url":%q,"maxRetries":0}`, dest.script("/cluster-bad", 400)))
	for _, id := range ids {
		if doc := s.waitTerminal(t, id, 20*time.Second); doc["status"] != "completed" {
			t.Errorf("%s ended %v", id, doc["status"])
		}
	}
	s.waitTerminal(t, failed, 20*time.Second)
	if a := call(t, "GET", s.api+"/dlq", ""); a.status != 200 || len(a.body["data"].([]any)) != 1 {
		t.Errorf("DLQ on the cluster: %d %s", a.status, a.raw)
	}
	if a := call(t, "POST", s.api+"/dlq/"+failed+"/redrive", `{"actor":"ops"}`); a.status != 202 {
		t.Errorf("redrive on the cluster: %d %s", a.status, a.raw)
	}
	if a := call(t, "GET", s.api+"/metrics", ""); a.status != 200 {
		t.Errorf("/metrics on the cluster: %d", a.status)
	}
}
