package tasks

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/egress"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/ids"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/retry"
	"github.com/retryd/retryd/internal/submit"
	"github.com/retryd/retryd/internal/tenant"
)

type testBundle struct {
	store *record.Store
	rdb   redis.UniversalClient
	dest  *httptest.Server
	mu    sync.Mutex
	hits  []*http.Request
	reply func(n int, w http.ResponseWriter)
}

func (b *testBundle) hitCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.hits)
}

func setup(t *testing.T, reply func(n int, w http.ResponseWriter)) (*Handler, *testBundle) {
	t.Helper()
	srv := redistest.Start(t)
	b := &testBundle{store: record.NewStore(srv.Client(), time.Hour), rdb: srv.Client(), reply: reply}
	b.dest = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		b.mu.Lock()
		b.hits = append(b.hits, r)
		n := len(b.hits)
		b.mu.Unlock()
		b.reply(n, w)
	}))
	t.Cleanup(b.dest.Close)
	h := &Handler{
		Store:  b.store,
		Client: (&egress.Guard{AllowPrivate: true}).Client(),
		Log:    slog.New(slog.NewTextHandler(io.Discard, nil)),
		Clock:  clock.Real,
		Rand:   func() float64 { return 0.5 },
	}
	return h, b
}

func (b *testBundle) submit(t *testing.T, body string) *record.Request {
	t.Helper()
	now := time.Now()
	r, err := submit.Parse([]byte(body), now)
	if err != nil {
		t.Fatalf("parse %s: %v", body, err)
	}
	r.ID = ids.New(now)
	if _, err := b.store.Create(context.Background(), r, "", nil, record.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	return r
}

func (b *testBundle) get(t *testing.T, id string) *record.Request {
	t.Helper()
	r, err := b.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return r
}

func TestSuccessCompletesWithResultAndHeaders(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(201); _, _ = io.WriteString(w, "created") })
	r := b.submit(t, `{"url":"`+b.dest.URL+`/x","method":"POST","body":"hello","headers":{"X-Custom":"1"}}`)
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err != nil {
		t.Fatalf("ProcessTask: %v", err)
	}
	got := b.get(t, r.ID)
	if got.Status != record.Completed || got.AttemptCount != 1 || got.Result != "created" || got.LastStatusCode != 201 || got.CompletedAt.IsZero() {
		t.Errorf("record after success: %+v", got)
	}
	if len(got.Attempts) != 1 || got.Attempts[0].Outcome != "success" || got.Attempts[0].StatusCode != 201 {
		t.Errorf("attempts: %+v", got.Attempts)
	}
	hit := b.hits[0]
	if hit.Method != "POST" || hit.Header.Get("X-Custom") != "1" || hit.Header.Get("Idempotency-Key") != r.ID ||
		hit.Header.Get("Retryd-Request-Id") != r.ID || hit.Header.Get("Retryd-Attempt") != "1" {
		t.Errorf("destination saw %s %v", hit.Method, hit.Header)
	}
}

func TestPermanentFailureSkipsRetry(t *testing.T) {
	t.Parallel()
	for _, code := range []int{400, 404, 410, 301} {
		h, b := setup(t, func(_ int, w http.ResponseWriter) { w.Header().Set("Location", "/elsewhere"); w.WriteHeader(code) })
		r := b.submit(t, `{"url":"`+b.dest.URL+`"}`)
		err := h.ProcessTask(context.Background(), NewDeliver(r.ID))
		if !errors.Is(err, asynq.SkipRetry) {
			t.Errorf("%d: err %v, want SkipRetry", code, err)
		}
		got := b.get(t, r.ID)
		want := string(retry.ClientError)
		if code == 301 {
			want = string(retry.Redirect)
		}
		if got.Status != record.Failed || got.FailureClass != want || got.AttemptCount != 1 || got.Attempts[0].Outcome != "permanent" {
			t.Errorf("%d: record %+v", code, got)
		}
	}
}

func TestRetryableFailureSchedulesTheNextAttempt(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(503) })
	r := b.submit(t, `{"url":"`+b.dest.URL+`","backoffMs":2000,"maxRetries":2}`)
	before := time.Now()
	err := h.ProcessTask(context.Background(), NewDeliver(r.ID))
	var due *retry.DueError
	if !errors.As(err, &due) {
		t.Fatalf("err %v, want a DueError", err)
	}
	got := b.get(t, r.ID)
	// Rand is fixed at 0.5: jitter factor 1.0, so the delay is exactly 2s.
	if got.Status != record.Retrying || got.FailureClass != "server_error" || !got.NextAttemptAt.Equal(due.Due.Truncate(time.Millisecond)) {
		t.Errorf("record %+v, due %v", got, due.Due)
	}
	if d := due.Due.Sub(before); d < 2*time.Second || d > 2500*time.Millisecond {
		t.Errorf("next attempt in %v, want 2s after the attempt", d)
	}
}

func TestRetryAfterReplacesBackoff(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.Header().Set("Retry-After", "7"); w.WriteHeader(429) })
	r := b.submit(t, `{"url":"`+b.dest.URL+`","backoffMs":100,"maxBackoffMs":5000}`)
	start := time.Now()
	err := h.ProcessTask(context.Background(), NewDeliver(r.ID))
	var due *retry.DueError
	if !errors.As(err, &due) {
		t.Fatalf("err %v, want a DueError", err)
	}
	// Retry-After 7s is capped at maxBackoffMs 5s, without jitter.
	if d := due.Due.Sub(start); d < 5*time.Second || d > 5200*time.Millisecond {
		t.Errorf("next attempt in %v, want 5s (Retry-After capped)", d)
	}
	if got := b.get(t, r.ID); got.FailureClass != "rate_limited" {
		t.Errorf("failure class %q", got.FailureClass)
	}
}

func TestBudgetSpentFails(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(500) })
	r := b.submit(t, `{"url":"`+b.dest.URL+`","backoffMs":100,"maxRetries":1}`)
	ctx := context.Background()
	err := h.ProcessTask(ctx, NewDeliver(r.ID))
	var due *retry.DueError
	if !errors.As(err, &due) {
		t.Fatalf("first attempt: %v, want a retry", err)
	}
	// A hand-over well before the due time is no attempt: the task goes
	// back to the timer, holding no slot.
	if err := h.ProcessTask(ctx, NewDeliver(r.ID)); !errors.Is(err, retry.ErrNotDue) || b.hitCount() != 1 {
		t.Fatalf("early hand-over: %v, hits %d; want ErrNotDue and no attempt", err, b.hitCount())
	}
	time.Sleep(time.Until(due.Due)) // the due time is what is tested
	if err := h.ProcessTask(ctx, NewDeliver(r.ID)); !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("second attempt: %v, want SkipRetry", err)
	}
	got := b.get(t, r.ID)
	if got.Status != record.Failed || got.AttemptCount != 2 || b.hitCount() != 2 {
		t.Errorf("record %+v, hits %d", got, b.hitCount())
	}
	// The first failure was retried; the last one spent the budget and
	// says so, promising no retry.
	if len(got.Attempts) != 2 || got.Attempts[0].Outcome != "retryable" || got.Attempts[1].Outcome != "exhausted" {
		t.Errorf("attempt outcomes %+v, want retryable then exhausted", got.Attempts)
	}
	if got.Attempts[1].StartedAt.Before(due.Due.Truncate(time.Millisecond)) { // records keep ms
		t.Errorf("second attempt at %v, due at %v: early", got.Attempts[1].StartedAt, due.Due)
	}
	// A further hand-over of a finished request does nothing.
	if err := h.ProcessTask(ctx, NewDeliver(r.ID)); err != nil || b.hitCount() != 2 {
		t.Errorf("hand-over after failure: err %v, hits %d", err, b.hitCount())
	}
}

func TestTimeoutBelowOneSecondIsEnforced(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { time.Sleep(400 * time.Millisecond); w.WriteHeader(200) })
	r := b.submit(t, `{"url":"`+b.dest.URL+`","timeoutMs":150,"maxRetries":0}`)
	start := time.Now()
	err := h.ProcessTask(context.Background(), NewDeliver(r.ID))
	if !errors.Is(err, asynq.SkipRetry) {
		t.Fatalf("err %v, want SkipRetry (budget 1 attempt)", err)
	}
	if el := time.Since(start); el > 350*time.Millisecond {
		t.Errorf("attempt took %v, want it cut at 150ms", el)
	}
	got := b.get(t, r.ID)
	if got.FailureClass != "timeout" || got.Attempts[0].Outcome != "exhausted" {
		t.Errorf("record %+v", got)
	}
}

func TestNetworkErrorIsRetryable(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) {})
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	r := b.submit(t, `{"url":"`+url+`","backoffMs":100}`)
	err := h.ProcessTask(context.Background(), NewDeliver(r.ID))
	if !errors.As(err, new(*retry.DueError)) {
		t.Fatalf("err %v, want a retry", err)
	}
	if got := b.get(t, r.ID); got.FailureClass != "network" || got.Status != record.Retrying {
		t.Errorf("record %+v", got)
	}
}

func TestCanceledRequestIsNotAttempted(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(200) })
	r := b.submit(t, `{"url":"`+b.dest.URL+`"}`)
	if _, err := b.store.Cancel(context.Background(), tenant.All, r.ID, "api", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err != nil {
		t.Fatalf("err %v", err)
	}
	if b.hitCount() != 0 {
		t.Errorf("destination hit %d times after cancel", b.hitCount())
	}
}

func TestFarFutureHandOverIsGivenBack(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(200) })
	r := b.submit(t, `{"url":"`+b.dest.URL+`","delayMs":60000}`)
	err := h.ProcessTask(context.Background(), NewDeliver(r.ID))
	var due *retry.DueError
	if !errors.As(err, &due) || !errors.Is(err, retry.ErrNotDue) || retry.IsFailure(err) {
		t.Fatalf("err %v, want a not-due DueError that is not a failure", err)
	}
	if b.hitCount() != 0 || b.get(t, r.ID).AttemptCount != 0 {
		t.Error("an attempt was made before its due time")
	}
}

func TestCrashedAttemptIsRecordedInterruptedAndFree(t *testing.T) {
	t.Parallel()
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(200) })
	r := b.submit(t, `{"url":"`+b.dest.URL+`","maxRetries":0}`)
	// A worker begins attempt 1 and dies before recording it.
	if _, err := b.store.Begin(context.Background(), r.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.ProcessTask(context.Background(), NewDeliver(r.ID)); err != nil {
		t.Fatalf("err %v", err)
	}
	got := b.get(t, r.ID)
	if got.Status != record.Completed || got.AttemptCount != 2 || len(got.Attempts) != 2 ||
		got.Attempts[0].Outcome != "interrupted" || got.Attempts[1].Outcome != "success" || got.Attempts[1].N != 2 {
		t.Errorf("record %+v attempts %+v", got, got.Attempts)
	}
}

// wakes records the requests flow control wakes.
type wakes struct {
	mu  sync.Mutex
	ids []string
}

// Apply notes the requests started now; a ParkedOnly one is never
// parked, and a timed one is left to its time.
func (w *wakes) Apply(_ context.Context, moves []flow.Move) []flow.Result {
	w.mu.Lock()
	defer w.mu.Unlock()
	res := make([]flow.Result, len(moves))
	for i, m := range moves {
		switch {
		case m.ParkedOnly:
			res[i].Gone = true
		case m.At.IsZero():
			w.ids = append(w.ids, m.ID)
		}
	}
	return res
}
func (w *wakes) Pending(context.Context, string) (bool, error) { return false, nil }

// A request canceled while it waits for a parallelism slot is handed one
// all the same (its task slept on); its task's run gives the slot back
// at once instead of holding it for its hand-over lease.
func TestCanceledWaiterGivesItsHandedSlotBack(t *testing.T) {
	t.Parallel()
	canceledWaiterGivesItsSlotBack(t, `"parallelism":1`, false)
}

// The same where the parallelism is an operator's pin on the key, not the
// requests' own.
func TestCanceledWaiterGivesAPinnedSlotBack(t *testing.T) {
	t.Parallel()
	canceledWaiterGivesItsSlotBack(t, "", true)
}

// canceledWaiterGivesItsSlotBack runs two requests of key k with the
// flowControl members fc, its parallelism pinned to 1 if pin, and cancels
// the second while it waits for the first's slot.
func canceledWaiterGivesItsSlotBack(t *testing.T, fc string, pin bool) {
	h, b := setup(t, func(_ int, w http.ResponseWriter) { w.WriteHeader(200) })
	w := &wakes{}
	rdb := b.rdb
	h.Flow = flow.New(flow.Config{Concurrency: 10, FairShare: 1}, rdb, w, h.Log, clock.Real)
	t.Cleanup(h.Flow.Close)
	ctx := context.Background()
	if fc != "" {
		fc = "," + fc
	}
	body := `{"url":"` + b.dest.URL + `","flowControl":{"key":"k"` + fc + `}}`
	first, waiter := b.submit(t, body), b.submit(t, body)
	if pin {
		if err := flow.Pin(ctx, rdb, FlowRequest(first).Key, 1, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	ticket, err := h.Flow.Admit(ctx, FlowRequest(first))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.ProcessTask(ctx, NewDeliver(waiter.ID)); !errors.Is(err, retry.ErrParked) {
		t.Fatalf("the waiter's run = %v, want parked", err)
	}
	if _, err := b.store.Cancel(ctx, tenant.All, waiter.ID, "api", time.Now()); err != nil {
		t.Fatal(err)
	}
	ticket.Done(ctx, flow.Succeeded) // hands the slot to the waiter and wakes it
	w.mu.Lock()
	woken := slices.Clone(w.ids)
	w.mu.Unlock()
	if !slices.Equal(woken, []string{waiter.ID}) {
		t.Fatalf("woken %v, want the waiter", woken)
	}
	key := FlowRequest(waiter).Key
	if taken, _, err := flow.Slots(ctx, rdb, key, time.Now()); err != nil || taken != 1 {
		t.Fatalf("before its run: %d slots taken (%v), want 1 (handed to the waiter)", taken, err)
	}
	if err := h.ProcessTask(ctx, NewDeliver(waiter.ID)); err != nil {
		t.Fatalf("the canceled waiter's run = %v", err)
	}
	if taken, _, err := flow.Slots(ctx, rdb, key, time.Now()); err != nil || taken != 0 {
		t.Errorf("after the canceled waiter's run: %d slots taken (%v), want 0", taken, err)
	}
	if b.hitCount() != 0 {
		t.Errorf("destination hit %d times, want 0", b.hitCount())
	}
}
