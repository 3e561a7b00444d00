package app_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/tasks"
)

// A submission no replica confirmed, kept because a replay of its
// Idempotency-Key saw it (the client gave up on the first call and sent
// it again), is not handed to the workers while only the primary holds
// it: a failover would throw it away, the key retried on the surviving
// node would become a second request, and the destination would get
// both. Once the replica holds it, the key still names that one request.
func TestUnconfirmedKeptSubmissionWaitsForTheReplica(t *testing.T) {
	t.Parallel()
	master := redistest.StartServer(t, redistest.Options{})
	replica := redistest.StartReplica(t, master)
	e := replicatedEngine(t, master, 300*time.Millisecond)
	onMaster := record.NewStore(master.Client(), time.Hour)
	ctx := context.Background()
	body := `{"url": "http://127.0.0.1:9/x", "delayMs": 3600000}`
	key := hdr("Idempotency-Key", "kept-once")
	// The replica first syncs with its primary.
	deadline := time.Now().Add(30 * time.Second)
	for (call{"POST", "/requests", body, hdr("Idempotency-Key", "warm-up")}).do(t, e, "").Code != http.StatusAccepted {
		if time.Now().After(deadline) {
			t.Fatal("the replica did not confirm a submission within 30 s")
		}
	}

	resume := replica.Pause(t)

	first := make(chan *httptest.ResponseRecorder, 1)
	go func() { first <- (call{"POST", "/requests", body, key}).do(t, e, "") }()
	// The first call's record is on the primary (its WAIT runs): the
	// repeat replays it, and marks it seen.
	var id string
	for deadline := time.Now().Add(30 * time.Second); id == ""; {
		page, err := onMaster.List(ctx, tenant.All, record.Pending, "", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page.Requests {
			if r.IdempotencyKey == "kept-once" {
				id = r.ID
			}
		}
		if id == "" && time.Now().After(deadline) {
			t.Fatal("the first call's record did not reach the primary within 30 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if w := (call{"POST", "/requests", body, key}).do(t, e, ""); w.Code != http.StatusServiceUnavailable {
		t.Fatalf("the repeat while no replica confirms: %d %s; want 503", w.Code, w.Body)
	}
	if w := <-first; w.Code != http.StatusServiceUnavailable {
		t.Fatalf("the first call while no replica confirms: %d %s; want 503", w.Code, w.Body)
	}

	// Kept (the repeat saw it), but no task: nothing delivers it yet.
	if r, err := onMaster.Get(ctx, id); err != nil || r.Status != record.Pending {
		t.Fatalf("the request a replay saw was not kept: %+v %v", r, err)
	}
	inspector := asynq.NewInspectorFromRedisClient(master.Client())
	if info, err := inspector.GetTaskInfo(tasks.Queue, id); !errors.Is(err, asynq.ErrTaskNotFound) {
		t.Errorf("a request no replica holds was handed to the workers: task %+v, err %v; want no task", info, err)
	}

	resume()
	var w *httptest.ResponseRecorder
	for deadline := time.Now().Add(30 * time.Second); ; {
		if w = (call{"POST", "/requests", body, key}).do(t, e, ""); w.Code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var doc struct{ ID string }
	_ = json.Unmarshal(w.Body.Bytes(), &doc)
	if w.Code != http.StatusOK || doc.ID != id {
		t.Errorf("the key once the replica is back: %d %s; want 200 naming %s", w.Code, w.Body, id)
	}
}
