package sweeper

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
	"github.com/retryd/retryd/tasks"
)

type testBundle struct {
	store     *record.Store
	queue     *tasks.Enqueuer
	inspector *asynq.Inspector
	clk       *clock.Fake
}

// setup returns a sweeper over a fresh Redis whose clock is b.clk.
func setup(t *testing.T) (*Sweeper, *testBundle) {
	t.Helper()
	rdb := redistest.Start(t).Client()
	b := &testBundle{
		store:     record.NewStore(rdb, time.Hour),
		queue:     &tasks.Enqueuer{Client: asynq.NewClientFromRedisClient(rdb), Inspector: asynq.NewInspectorFromRedisClient(rdb)},
		inspector: asynq.NewInspectorFromRedisClient(rdb),
		clk:       clock.NewFake(time.Now()),
	}
	sw := &Sweeper{RDB: rdb, Store: b.store, Queue: b.queue, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Interval: time.Hour, Grace: 5 * time.Second, Owner: "test", Clock: b.clk}
	return sw, b
}

// create stores a pending request as the API would, without its task.
func (b *testBundle) create(t *testing.T, body string) string {
	t.Helper()
	r, err := submit.Parse([]byte(body), b.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.ID = ids.New(b.clk.Now())
	if _, err := b.store.Create(context.Background(), r, "", nil, record.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

// canceled stores a request of tenant t made of body and cancels it: a
// finished request, its retention started.
func (b *testBundle) canceled(t *testing.T, tn, body string) string {
	t.Helper()
	ctx := context.Background()
	r, err := submit.Parse([]byte(body), b.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	r.ID, r.Tenant = ids.New(b.clk.Now()), tn
	if _, err := b.store.Create(ctx, r, "", nil, record.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.store.Cancel(ctx, tenant.All, r.ID, "test", b.clk.Now()); err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func (b *testBundle) taskState(t *testing.T, id string) asynq.TaskState {
	t.Helper()
	info, err := b.inspector.GetTaskInfo(tasks.Queue, id)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return info.State
}

func TestARecordWithoutATaskIsEnqueuedAfterTheGrace(t *testing.T) {
	t.Parallel()
	sw, b := setup(t)
	id := b.create(t, `{"url":"https://example.com"}`)

	// Within the grace the API may still be about to enqueue: hands off.
	st, ran, err := sw.SweepOnce(context.Background())
	if err != nil || !ran || st.Missing != 0 || b.taskState(t, id) != 0 {
		t.Fatalf("within the grace: %+v ran=%v err=%v, task %v", st, ran, err, b.taskState(t, id))
	}
	b.clk.Add(sw.Grace + time.Second)
	st, _, err = sw.SweepOnce(context.Background())
	if err != nil || st.Missing != 1 || st.Checked != 1 {
		t.Fatalf("after the grace: %+v %v, want 1 missing", st, err)
	}
	if s := b.taskState(t, id); s != asynq.TaskStatePending {
		t.Errorf("task state %v, want pending", s)
	}
	// Once it has its task, the next sweep leaves it alone.
	if st, _, _ := sw.SweepOnce(context.Background()); st.Missing != 0 {
		t.Errorf("second sweep repaired again: %+v", st)
	}
}

func TestAnArchivedTaskOfAnUnfinishedRequestIsRequeued(t *testing.T) {
	t.Parallel()
	sw, b := setup(t)
	id := b.create(t, `{"url":"https://example.com"}`)
	if err := b.queue.Enqueue(context.Background(), id, b.clk.Now(), time.Second, 5); err != nil {
		t.Fatal(err)
	}
	if err := b.inspector.ArchiveTask(tasks.Queue, id); err != nil {
		t.Fatal(err)
	}
	b.clk.Add(sw.Grace + time.Second)
	st, _, err := sw.SweepOnce(context.Background())
	if err != nil || st.Archived != 1 {
		t.Fatalf("sweep: %+v %v, want 1 archived", st, err)
	}
	if s := b.taskState(t, id); s != asynq.TaskStatePending {
		t.Errorf("task state %v, want pending", s)
	}
}

func TestALostCallbackIsEnqueued(t *testing.T) {
	t.Parallel()
	sw, b := setup(t)
	id := b.create(t, `{"url":"https://example.com","callbackUrl":"https://example.com/cb","delayMs":600000}`)
	if _, err := b.store.Cancel(context.Background(), tenant.All, id, "api", b.clk.Now()); err != nil {
		t.Fatal(err)
	}
	st, _, err := sw.SweepOnce(context.Background())
	if err != nil || st.CallbackLost != 1 {
		t.Fatalf("sweep: %+v %v, want 1 lost callback", st, err)
	}
	if _, err := b.inspector.GetTaskInfo(tasks.Queue, tasks.CallbackTaskID(id)); err != nil {
		t.Errorf("no callback task: %v", err)
	}
	if st, _, _ := sw.SweepOnce(context.Background()); st.CallbackLost != 0 {
		t.Errorf("second sweep enqueued the callback again: %+v", st)
	}
}

func TestOneSweeperAtATime(t *testing.T) {
	t.Parallel()
	sw, _ := setup(t)
	if err := sw.RDB.SetNX(context.Background(), lockKey, "another process", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if _, ran, err := sw.SweepOnce(context.Background()); ran || err != nil {
		t.Fatalf("swept while another process held the lock (ran=%v err=%v)", ran, err)
	}
	sw.RDB.Del(context.Background(), lockKey)
	if _, ran, err := sw.SweepOnce(context.Background()); !ran || err != nil {
		t.Fatalf("did not sweep with the lock free (ran=%v err=%v)", ran, err)
	}
	if owner := sw.RDB.Get(context.Background(), lockKey).Val(); owner != "" {
		t.Errorf("the lock is still held by %q after the sweep", owner)
	}
}

// The safety net's cost does not grow with the backlog: a sweep looks at a
// slice of the unfinished records (MinPerSweep here, as 1,000 records at a
// 10 s interval are under it), and the next sweep goes on where it
// stopped, so every record is looked at once per round, none twice.
func TestASweepLooksAtASliceAndTheNextGoesOn(t *testing.T) {
	t.Parallel()
	sw, b := setup(t)
	sw.Interval = 10 * time.Second
	const n = 1000
	for range n {
		b.create(t, `{"url":"https://example.com"}`)
	}
	b.clk.Add(sw.Grace + time.Second)
	missing := 0
	for i := 0; i < n/MinPerSweep; i++ {
		st, _, err := sw.SweepOnce(context.Background())
		if err != nil || st.Checked != MinPerSweep || st.Missing != MinPerSweep {
			t.Fatalf("sweep %d: %+v %v, want %d looked at and repaired", i, st, err, MinPerSweep)
		}
		missing += st.Missing
	}
	if missing != n {
		t.Errorf("%d repaired over a round, want %d", missing, n)
	}
	// The next round finds every one with its task.
	if st, _, _ := sw.SweepOnce(context.Background()); st.Missing != 0 || st.Checked != MinPerSweep {
		t.Errorf("the next round's first sweep: %+v", st)
	}
	// A backlog past MinPerSweep's reach is looked at once per
	// SafetyNetPeriod.
	if got, want := sw.budget(100_000), int64(100_000*10/300); got != want+1 && got != want {
		t.Errorf("budget(100000) = %d, want about %d", got, want)
	}
}

// Every worker runs a sweeper, but together they look at the records once
// per interval: the safety net's budget (each waiting request once per
// SafetyNetPeriod) is made for that pace, and two workers would otherwise
// look twice as often. A tick without the turn only puts back the tasks
// of dead workers. Ten sweeps of two sweepers at 100 ms take at least
// nine turns of 90 ms; without turns they take about half a second.
func TestWorkersTakeTurnsToSweep(t *testing.T) {
	t.Parallel()
	first, _ := setup(t)
	second := *first
	second.Owner = "other"
	var sweeps, strandedOnly atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for i, sw := range []*Sweeper{first, &second} {
		sw.Interval = 100 * time.Millisecond
		sw.Clock = clock.Real // the turns expire in Redis, on its clock
		sw.OnSweep = func(st Stats) {
			if st.Full {
				sweeps.Add(1)
			} else {
				strandedOnly.Add(1)
			}
		}
		if i > 0 {
			// Out of phase, as workers are: ticks at the same moment
			// would meet at the lock, and hide the double pace.
			time.Sleep(50 * time.Millisecond)
		}
		wg.Add(1)
		go func() { defer wg.Done(); sw.Run(ctx) }()
	}
	deadline := time.Now().Add(30 * time.Second)
	for sweeps.Load() < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d sweeps in 30 s, want 10", sweeps.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	took := time.Since(start)
	cancel()
	wg.Wait()
	if took < 9*90*time.Millisecond {
		t.Errorf("10 sweeps took %v, want at least %v: the workers did not take turns", took, 9*90*time.Millisecond)
	}
	// A tick without the turn still puts back the tasks of dead workers.
	if strandedOnly.Load() == 0 {
		t.Error("no tick without the turn looked for the tasks of dead workers")
	}
}

// A sweep erases the payloads of the requests whose tenant's payload
// retention ended, and only theirs, and says how many.
func TestASweepErasesPayloadsPastTheirRetention(t *testing.T) {
	t.Parallel()
	sw, b := setup(t)
	ctx := context.Background()
	b.store.SetPayloadRetention(10 * time.Minute)
	if err := b.store.SetTenantRetention(ctx, "gdpr", record.Retention{Payload: time.Minute}, b.clk.Now()); err != nil {
		t.Fatal(err)
	}
	const card = `{"url":"https://example.com","body":"card 4242"}`
	gdpr, other := b.canceled(t, "gdpr", card), b.canceled(t, "", card)
	b.clk.Add(2 * time.Minute)
	st, ran, err := sw.SweepOnce(ctx)
	if err != nil || !ran || st.PayloadsExpired != 1 {
		t.Fatalf("sweep: %+v ran=%v err=%v; want one payload erased", st, ran, err)
	}
	for id, want := range map[string]bool{gdpr: true, other: false} {
		r, err := b.store.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Expunged != want || (want && (r.ExpungedBy != record.RetentionActor || r.Body != "")) || (!want && r.Body != "card 4242") {
			t.Errorf("request of tenant %q: expunged %v by %q body %q; want expunged %v", r.Tenant, r.Expunged, r.ExpungedBy, r.Body, want)
		}
	}
	// The default tenant's (10 minutes) ends later.
	b.clk.Add(9 * time.Minute)
	if st, _, err := sw.SweepOnce(ctx); err != nil || st.PayloadsExpired != 1 {
		t.Errorf("second sweep: %+v, %v; want the default tenant's payload erased", st, err)
	}
}

// A sweep erases every payload due, batch after batch, not one batch: a
// tenant finishing more requests than a batch a sweep keeps its payload
// retention.
func TestASweepErasesEveryPayloadDueNotOneBatch(t *testing.T) {
	t.Parallel()
	sw, b := setup(t)
	sw.batch = 2
	ctx := context.Background()
	if err := b.store.SetTenantRetention(ctx, "gdpr", record.Retention{Payload: time.Minute}, b.clk.Now()); err != nil {
		t.Fatal(err)
	}
	var due []string
	for range 5 {
		due = append(due, b.canceled(t, "gdpr", `{"url":"https://example.com","body":"card 4242"}`))
	}
	b.clk.Add(2 * time.Minute)
	st, ran, err := sw.SweepOnce(ctx)
	if err != nil || !ran || st.PayloadsExpired != len(due) {
		t.Fatalf("sweep: %+v ran=%v err=%v; want all %d payloads erased in batches of 2", st, ran, err, len(due))
	}
	for _, id := range due {
		if r, err := b.store.Get(ctx, id); err != nil || !r.Expunged {
			t.Errorf("%s: expunged %v, %v", id, r != nil && r.Expunged, err)
		}
	}
}

// A sweep ends every request past its retention, batch after batch, not
// one batch.
func TestASweepTrimsEveryExpiredEntryNotOneBatch(t *testing.T) {
	t.Parallel()
	sw, b := setup(t)
	sw.batch = 2
	ctx := context.Background()
	if err := b.store.SetTenantRetention(ctx, "brief", record.Retention{Records: 300 * time.Millisecond}, b.clk.Now()); err != nil {
		t.Fatal(err)
	}
	var gone []string
	for range 5 {
		gone = append(gone, b.canceled(t, "brief", `{"url":"https://example.com"}`))
	}
	b.clk.Add(2 * time.Minute) // past the retention and the trim's minute of slack
	st, ran, err := sw.SweepOnce(ctx)
	// Three entries a request: the canceled, host and finished indexes.
	if err != nil || !ran || st.Trimmed != 3*len(gone) {
		t.Fatalf("sweep: %+v ran=%v err=%v; want the %d entries of %d requests past their retention trimmed in batches of 2",
			st, ran, err, 3*len(gone), len(gone))
	}
	for _, id := range gone {
		if _, err := b.store.Get(ctx, id); !errors.Is(err, record.ErrNotFound) {
			t.Errorf("%s outlived its retention: %v", id, err)
		}
	}
}
