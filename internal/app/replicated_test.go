package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
)

// replicatedEngine is an API over master with REDIS_WAIT_REPLICAS=1,
// whose changes wait at most wait for the replica.
func replicatedEngine(t *testing.T, master *redistest.Server, wait time.Duration) *gin.Engine {
	t.Helper()
	env := map[string]string{"REDIS_URL": master.URL, "ALLOW_PRIVATE_TARGETS": "true", "REDIS_WAIT_REPLICAS": "1"}
	cfg, err := config.Load(func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	e, closeEngine := app.APIEngine(cfg, master.Client(), asynq.RedisClientOpt{Addr: master.Addr}, app.EngineOptions{ReplicaWait: wait},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(closeEngine)
	return e
}

// submitLater submits a request due in an hour and returns its id.
func submitLater(t *testing.T, e http.Handler) string {
	t.Helper()
	w := call{"POST", "/requests", `{"url": "http://127.0.0.1:9/x", "delayMs": 3600000}`, nil}.do(t, e, "")
	if w.Code != http.StatusAccepted {
		t.Fatalf("submit: %d %s", w.Code, w.Body)
	}
	var doc struct{ ID string }
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || doc.ID == "" {
		t.Fatalf("submit answered %s (%v)", w.Body, err)
	}
	return doc.ID
}

// With REDIS_WAIT_REPLICAS=1, a change is answered once the replica holds
// it: while the replica is stopped a cancel (or a pause, a schedule, a
// topic change, in either dialect) is answered 503 with Retry-After when
// the wait runs out, and a cancel waiting longer is answered only after
// the replica is back, which then holds it.
func TestChangesAreAnsweredOnceTheReplicaHoldsThem(t *testing.T) {
	t.Parallel()
	master := redistest.StartServer(t, redistest.Options{})
	replica := redistest.StartReplica(t, master)
	short := replicatedEngine(t, master, 200*time.Millisecond)
	long := replicatedEngine(t, master, time.Minute)
	onReplica := record.NewStore(replica.Client(), time.Hour)
	ctx := context.Background()

	// Made while the replica runs, through the engine that waits long for
	// it: a replica still catching up on a busy machine may take more than
	// the short wait.
	nativeID, qstashID, laterID, lastID := submitLater(t, long), submitLater(t, long), submitLater(t, long), submitLater(t, long)
	if w := (call{"POST", "/v2/queues", `{"queueName": "q1", "parallelism": 1}`, nil}).do(t, long, ""); w.Code/100 != 2 {
		t.Fatalf("create a queue: %d %s", w.Code, w.Body)
	}

	resume := replica.Pause(t)

	for _, tc := range []struct {
		name string
		c    call
		// qstash: the answer is in QStash's error shape.
		qstash bool
	}{
		{"cancel", call{"DELETE", "/requests/" + nativeID, "", nil}, false},
		{"cancel through /v2", call{"DELETE", "/v2/messages/" + qstashID, "", nil}, true},
		{"pause a flow", call{"POST", "/flows/k1/pause", "", nil}, false},
		{"pause a queue through /v2", call{"POST", "/v2/queues/q1/pause", "", nil}, true},
		{"create a schedule", call{"POST", "/schedules", `{"cron": "*/5 * * * *", "request": {"url": "http://127.0.0.1:9/x"}}`, nil}, false},
		{"change a topic", call{"POST", "/topics/t1/endpoints", `{"endpoints": [{"url": "http://127.0.0.1:9/x"}]}`, nil}, false},
	} {
		w := tc.c.do(t, short, "")
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Errorf("%s while no replica acknowledges: %d (Retry-After %q) %s; want 503 with Retry-After",
				tc.name, w.Code, w.Header().Get("Retry-After"), w.Body)
			continue
		}
		var body map[string]any
		_ = json.Unmarshal(w.Body.Bytes(), &body)
		if _, isText := body["error"].(string); isText != tc.qstash {
			t.Errorf("%s: 503 body %s is not in its dialect's error shape", tc.name, w.Body)
		}
		if got := w.Header().Get("Location"); (got != "") != (tc.c.path == "/schedules") {
			t.Errorf("%s: the 503's Location is %q; want one only for what a creation made", tc.name, got)
		}
	}

	// A cancel that may wait a minute: made on the primary at once,
	// answered only once the replica is back.
	answered := make(chan *httptest.ResponseRecorder, 1)
	go func() { answered <- call{"DELETE", "/requests/" + laterID, "", nil}.do(t, long, "") }()
	onMaster := record.NewStore(master.Client(), time.Hour)
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := onMaster.Get(ctx, laterID)
		if err == nil && r.Status == record.Canceled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cancel was not made on the primary within 30s: %v %v", r, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case w := <-answered:
		t.Fatalf("the cancel was answered (%d) while the replica was stopped", w.Code)
	default:
	}
	resume()
	select {
	case w := <-answered:
		if w.Code != http.StatusOK {
			t.Fatalf("cancel once the replica is back: %d %s", w.Code, w.Body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the cancel was not answered within 30s of the replica's return")
	}
	// Read at once, no polling: the answer came after the replica had it.
	if r, err := onReplica.Get(ctx, laterID); err != nil || r.Status != record.Canceled {
		t.Fatalf("the replica does not hold the acknowledged cancel: %+v %v", r, err)
	}
	if w := (call{"DELETE", "/requests/" + lastID, "", nil}).do(t, long, ""); w.Code != http.StatusOK {
		t.Fatalf("cancel with the replica running: %d %s", w.Code, w.Body)
	}
	if r, err := onReplica.Get(ctx, lastID); err != nil || r.Status != record.Canceled {
		t.Fatalf("the replica does not hold the acknowledged cancel: %+v %v", r, err)
	}
}
