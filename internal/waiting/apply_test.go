package waiting

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/flow"
	"github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/partition"
	"github.com/retryd/retryd/internal/redistest"
)

// Apply makes each of flow's moves and says what came of it: a parked
// task started now, a request with no task gone, a ParkedOnly move of a
// task that is not in a park gone (and left as it is), a timed move an
// entry in the timer.
func TestApplyAnswersWhatCameOfEachMove(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client()
	ctx := context.Background()
	q := "q"
	client := asynq.NewClientFromRedisClient(rdb)
	for id, opts := range map[string][]asynq.Option{
		"parked":      {asynq.ProcessIn(time.Hour)},
		"parked-only": {asynq.ProcessIn(time.Hour)},
		"timed":       {asynq.ProcessIn(time.Hour)},
		"pending":     nil,
	} {
		if _, err := client.Enqueue(asynq.NewTask("t", nil), append(opts, asynq.Queue(q), asynq.TaskID(id))...); err != nil {
			t.Fatal(err)
		}
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	o := New(Config{Queue: q, Redis: rdb, Timer: NewTimer(rdb, partition.Set{}, q, nil, log, Tuning{})})
	at := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	moves := []flow.Move{
		flow.Now("parked"),
		flow.Now("missing"),
		{ID: "pending", ParkedOnly: true},
		{ID: "parked-only", ParkedOnly: true},
		flow.At("timed", at),
	}
	want := []flow.Result{{}, {Gone: true}, {Gone: true}, {}, {}}
	got := o.Apply(ctx, moves)
	if len(got) != len(want) {
		t.Fatalf("Apply answered %d results for %d moves", len(got), len(moves))
	}
	for i := range want {
		if got[i].Gone != want[i].Gone || got[i].Err != nil {
			t.Errorf("move %+v: %+v, want %+v", moves[i], got[i], want[i])
		}
	}
	for id, wantPending := range map[string]bool{"parked": true, "parked-only": true, "pending": true, "timed": false} {
		if ok, err := o.Pending(ctx, id); err != nil || ok != wantPending {
			t.Errorf("%s pending = %v (%v), want %v", id, ok, err, wantPending)
		}
	}
	score, err := rdb.ZScore(ctx, keys.Timer(q), "timed").Result()
	if err != nil || int64(score) != at.UnixMilli() {
		t.Errorf("the timer's entry of the timed move: %v (%v), want %d", int64(score), err, at.UnixMilli())
	}

	// A move Redis could not make is an error, not gone.
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: time.Second})
	defer dead.Close()
	o = New(Config{Queue: q, Redis: dead})
	if res := o.Apply(ctx, []flow.Move{flow.Now("parked")}); len(res) != 1 || res[0].Err == nil || res[0].Gone {
		t.Errorf("a move with Redis down: %+v, want an error", res)
	}
}
