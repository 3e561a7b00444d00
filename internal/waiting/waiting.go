// Package waiting owns waiting: it is the only code in retryd that makes
// a request's task sleep or run. It enqueues a task for later and deletes
// one (Enqueue, Delete), and has two entry points for the decisions of
// others: Hand takes a handler's verdict on the task it returns (parked,
// or due at a time), and Apply makes flow control's moves (start a task
// now, or at a time to the millisecond through retryd's timer) and
// answers what came of each. It keeps the safety nets (asynq's own due
// time Lag after the timer's, and the repair of tasks stranded by a dead
// worker), and holds asynq's private layout below it
// (internal/waiting/asynqx, pinned to one asynq version by its test) with
// the timer (internal/waiting/timer).
// Outside this tree nothing imports asynqx or the timer, names an asynq
// key or calls asynq's task-moving API; and nothing writes a line but
// through flow's line library (internal/flow/lines), since a line changes
// in the same script as its gate's state (TestOnlyTheOwnerMovesTasks).
//
// A wake is never lost to a task in transit: a move of a task still active
// (its park on its way to asynq) leaves the task's woken mark, and the
// timer's look that sees the park land starts it (docs/waiting.md).
//
// It decides nothing: flow control decides whether a request may start,
// and the handler decides when an attempt is due; this package turns
// those decisions into asynq's state.
package waiting

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/waiting/asynqx"
	"github.com/retryd/retryd/internal/waiting/timer"
)

// ErrGone is wake's answer for a request with no waiting task any more
// (canceled, finished).
var ErrGone = errors.New("no parked task")

// Config is what an Owner works with.
type Config struct {
	// Parts are the partitions, each with its own queue named like its
	// tag; the zero value is the single queue Queue.
	Parts partition.Set
	Queue string
	// Redis is the client tasks are moved with (asynq's own).
	Redis redis.UniversalClient
	// Timer starts waiting tasks on time; nil leaves it to asynq's whole
	// seconds.
	Timer *Timer
	// Tuning: its zero fields take DefaultTuning's.
	Tuning Tuning
	// Clock is the owner's; nil is the wall clock.
	Clock clock.Clock
	// OnWake, when set, is called after each wake with its id and result:
	// a test hook. nil in production.
	OnWake func(id string, err error)
}

// Owner parks and wakes the tasks of one set of queues: the partitions'
// queues, or Queue alone.
type Owner struct {
	cfg       Config // New's, with the Tuning's defaults
	published asynqx.Publisher
}

// New returns the owner of the waiting of cfg's queues.
func New(cfg Config) *Owner {
	cfg.Tuning = cfg.Tuning.WithDefaults()
	if cfg.Clock == nil {
		cfg.Clock = clock.Real
	}
	return &Owner{cfg: cfg}
}

// Timer is retryd's timer (internal/waiting/timer).
type Timer = timer.Timer

// Bell is the workers' doorbell (see asynqx.Bell).
type Bell = asynqx.Bell

// NewTimer returns the timer of parts' queues (queue alone when parts is
// the zero value), timed by tune.Timer. bell rings the workers after a
// move when the doorbell is in another cluster slot than the queue; nil
// for a process that only sets entries.
func NewTimer(rdb redis.UniversalClient, parts partition.Set, queue string, bell timer.Ringer, log *slog.Logger, tune Tuning) *Timer {
	names := timer.Names{Timer: keys.Timer, Parked: keys.Parked, Mover: keys.TimerMover,
		Channel: keys.TimerChannel}
	queues := []string{queue}
	if parts.Len() > 0 {
		queues = parts.Tags()
	}
	if bell != nil {
		names.Bell = func(q string) string { return keys.RingableBell(parts, q) }
	}
	return timer.New(rdb, queues, names, bell, log, tune.WithDefaults().Timer)
}

// NewBell returns the doorbell of parts' queues (queue alone when parts is
// the zero value), to add as a hook to the Redis client asynq uses: a
// worker's waits up to wait on an empty fetch; wait 0 makes one that only
// rings. Its pauses are tune's.
func NewBell(rdb redis.UniversalClient, parts partition.Set, queue string, wait time.Duration, tune Tuning) *Bell {
	tune = tune.WithDefaults()
	key, queues := keys.Bell(queue), []string{queue}
	if parts.Len() > 0 {
		key, queues = keys.Bell(parts.Tag(0)), parts.Tags()
	}
	b := asynqx.NewBell(rdb, key, queues, wait)
	b.ErrorPause, b.LatePause = tune.BellErrorPause, tune.BellLatePause
	return b
}

// WithoutRing marks ctx so that an enqueue made with it does not ring the
// doorbell: the script that made the request rang already.
func WithoutRing(ctx context.Context) context.Context { return asynqx.WithoutRing(ctx) }

// QueueOf is the asynq queue of request id.
func (o *Owner) QueueOf(id string) string {
	if o.cfg.Parts.Len() == 0 {
		return o.cfg.Queue
	}
	return o.cfg.Parts.Tag(o.cfg.Parts.OfID(id))
}

// Lag is how much later than the timer's entry asynq's own due time is
// (Tuning.Lag): what asynq's RetryDelayFunc adds to a due time.
func (o *Owner) Lag() time.Duration { return o.cfg.Tuning.Lag }

// SafetyNet is asynq's own due time of a task the timer starts at due.
func (o *Owner) SafetyNet(due time.Time) time.Time {
	if o == nil || o.cfg.Timer == nil {
		return due
	}
	return due.Add(o.cfg.Tuning.Lag)
}

// Enqueue makes task (of request id, with asynq's opts) through client:
// pending now when due is not after now, else waiting until due, started
// then by the timer with asynq's own due time (SafetyNet) as the safety
// net. asynq's errors come back as they are (ErrTaskIDConflict
// included). A nil owner leaves the due time to asynq alone.
func (o *Owner) Enqueue(ctx context.Context, client *asynq.Client, task *asynq.Task, id string, due time.Time, opts ...asynq.Option) error {
	later := due.After(time.Now())
	if later {
		opts = append(opts, asynq.ProcessAt(o.SafetyNet(due)))
	}
	if _, err := client.EnqueueContext(ctx, task, opts...); err != nil {
		return err
	}
	if later {
		return o.wakeAt(ctx, id, due)
	}
	return nil
}

// Task is a pending task as another package's script writes it: hash Key
// with Fields, its id pushed onto List. It is waiting's own type, so that
// waiting needs nothing of internal/record; the caller hands it on as a
// record.Task, which holds the same.
type Task struct {
	Key, List string
	Fields    []any
}

// PendingTask is the task of request id (type typ, carrying payload) as
// asynq's client would enqueue it now with MaxRetry(retry) and
// Timeout(timeout), for the submission script to write with the request
// (record.CreateOptions.Task): one round trip instead of two. nil when o
// has no Redis client to add the queue to asynq's list of queues with.
func (o *Owner) PendingTask(ctx context.Context, typ string, payload []byte, id string, retry int, timeout time.Duration) (*Task, error) {
	if o == nil || o.cfg.Redis == nil {
		return nil, nil
	}
	q := o.QueueOf(id)
	if err := o.published.Publish(ctx, o.cfg.Redis, q); err != nil {
		return nil, err
	}
	t := asynqx.PendingTask(asynqx.Message{Type: typ, Payload: payload, ID: id, Queue: q, Retry: retry, Timeout: timeout},
		o.cfg.Clock.Now())
	return &Task{Key: t.Task, List: t.Pending, Fields: t.Fields}, nil
}

// Delete removes request id's task from queue through inspector. A task
// that is not there (done already) is not an error; a running one cannot
// be deleted (asynq's error).
func (o *Owner) Delete(inspector *asynq.Inspector, queue, id string) error {
	err := inspector.DeleteTask(queue, id)
	if errors.Is(err, asynq.ErrTaskNotFound) || errors.Is(err, asynq.ErrQueueNotFound) {
		return nil
	}
	return err
}

// Verdict is what a task's handler decided as it returns the task to
// asynq: Parked (it waits for an event: flow's wake, or its safety net),
// else due at DueAt.
type Verdict struct {
	Parked bool
	DueAt  time.Time
}

// Hand takes a handler's verdict on the task of request id it is
// returning: the one entry point through which the handler has its task
// wait. A park is noted (park); a due time is set in the timer (wakeAt).
func (o *Owner) Hand(ctx context.Context, id string, v Verdict) error {
	if v.Parked {
		return o.park(ctx, id)
	}
	return o.wakeAt(ctx, id, v.DueAt)
}

// park notes that request id's task is being parked (its handler returns
// it to asynq until a wake or its deadline), so that it waits in asynq's
// scheduled set, not among the retries.
func (o *Owner) park(ctx context.Context, id string) error {
	if o == nil || o.cfg.Timer == nil {
		return nil
	}
	return o.cfg.Timer.Park(ctx, o.QueueOf(id), id)
}

// wakeAt starts request id's waiting task at t: an entry in its
// partition's timer. Without a timer asynq's own due time does.
func (o *Owner) wakeAt(ctx context.Context, id string, t time.Time) error {
	if o == nil || o.cfg.Timer == nil {
		return nil
	}
	return o.cfg.Timer.At(ctx, o.QueueOf(id), id, t)
}

// Apply makes flow's moves, in order, and answers what came of each: it
// is the one way flow's decisions reach the tasks (flow.Mover).
func (o *Owner) Apply(ctx context.Context, moves []flow.Move) []flow.Result {
	res := make([]flow.Result, len(moves))
	for i, m := range moves {
		switch {
		case !m.At.IsZero():
			res[i].Err = o.wakeAt(ctx, m.ID, m.At)
		case m.ParkedOnly:
			moved, err := o.wakeParked(ctx, m.ID)
			res[i] = flow.Result{Gone: !moved && err == nil, Err: err}
		default:
			err := o.wake(ctx, m.ID)
			if errors.Is(err, ErrGone) {
				res[i].Gone = true
			} else {
				res[i].Err = err
			}
		}
	}
	return res
}

// wake makes request id's waiting task runnable now. Only a waiting task
// is moved: an archived one run again would be a redrive. A task still
// active is on its way to being parked (a park takes a few round trips)
// or running: wake leaves its woken mark, and the timer's look that sees
// the park land (Timer.Park, within ParkRetry of it) starts it at once.
// So a wake is never lost to a park in transit, and no caller waits or
// tries again. wake returns ErrGone when there is no task to wake.
func (o *Owner) wake(ctx context.Context, id string) (err error) {
	if o.cfg.OnWake != nil {
		defer func() { o.cfg.OnWake(id, err) }()
	}
	q := o.QueueOf(id)
	now := o.cfg.Clock.Now()
	state, err := asynqx.Run(ctx, o.cfg.Redis, q, o.bellIn(q), id, now, o.cfg.Tuning.Timer.Woken)
	if err != nil {
		return err
	}
	switch state {
	case asynqx.Moved:
		return o.ring(ctx, q)
	case asynqx.Pending, asynqx.Active:
		return nil // runnable already, or starts as it lands
	}
	return ErrGone
}

// wakeParked makes request id's task runnable now if it sleeps in a park,
// never a retry waiting out its backoff, and says whether it did.
func (o *Owner) wakeParked(ctx context.Context, id string) (bool, error) {
	q := o.QueueOf(id)
	moved, err := asynqx.RunParked(ctx, o.cfg.Redis, q, o.bellIn(q), id, o.cfg.Clock.Now())
	if err != nil || !moved {
		return false, err
	}
	return true, o.ring(ctx, q)
}

// Pending says whether request id's task is runnable and not yet taken by
// a worker: a woken request still on its way.
func (o *Owner) Pending(ctx context.Context, id string) (bool, error) {
	state, err := asynqx.State(ctx, o.cfg.Redis, o.QueueOf(id), id)
	return state == "pending", err
}

// bellIn is the doorbell a script of queue rings itself, or "".
func (o *Owner) bellIn(queue string) string {
	if o.cfg.Parts.Len() == 0 {
		return keys.Bell(queue)
	}
	return keys.RingableBell(o.cfg.Parts, queue)
}

// ring rings the doorbell after a task of queue became pending, unless the
// script that moved it rang (bellIn).
func (o *Owner) ring(ctx context.Context, queue string) error {
	if o.bellIn(queue) != "" || o.cfg.Timer == nil || o.cfg.Timer.Bell == nil {
		return nil
	}
	return o.cfg.Timer.Bell.Ring(ctx)
}
