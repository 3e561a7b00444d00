package tasks

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/record"
)

// asynqStatsTTL is how long asynq keeps a day's processed counter.
const asynqStatsTTL = 90 * 24 * time.Hour

// doneKeys names what asynq's "done" changes for request id's task run at
// now (asynq v0.26's layout, as in NewTask).
func doneKeys(id string, now time.Time) *record.TaskDone {
	return &record.TaskDone{
		ActiveKey:            asynqPrefix + "active",
		LeaseKey:             asynqPrefix + "lease",
		TaskKey:              asynqPrefix + "t:" + id,
		ProcessedDayKey:      asynqPrefix + "processed:" + now.UTC().Format("2006-01-02"),
		ProcessedKey:         asynqPrefix + "processed",
		ProcessedDayExpireAt: now.Add(asynqStatsTTL).Unix(),
	}
}

// DoneByRecord lets a completed delivery's record write also do asynq's
// "done" for its task run, and answers asynq's own "done" call for that
// run without a round trip. Add it as a hook to the client the worker's
// asynq server uses, and give it to the Handler.
type DoneByRecord struct {
	done claims[struct{}] // task keys whose record write did "done"
}

// NewDoneByRecord returns an empty DoneByRecord.
func NewDoneByRecord() *DoneByRecord { return &DoneByRecord{} }

// DialHook is part of redis.Hook.
func (d *DoneByRecord) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessPipelineHook is part of redis.Hook; asynq's "done" is not pipelined.
func (d *DoneByRecord) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// ProcessHook answers asynq's "done" script (recognised by its keys: the
// queue's active list, then its lease set, then the task) for runs the
// record write finished already, as the script would: "OK".
func (d *DoneByRecord) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if c, ok := cmd.(*redis.Cmd); ok {
			if key := asynqDoneTaskKey(c.Args()); key != "" {
				if _, done := d.done.take(key); done {
					c.SetVal("OK")
					return nil
				}
			}
		}
		return next(ctx, cmd)
	}
}

// asynqDoneTaskKey returns the task key of an asynq "done" script call for
// the queue (keys active, lease, task, processed counters), or "".
func asynqDoneTaskKey(args []any) string {
	keys, _ := asynqScriptCall(args, 5)
	if keys == nil || keys[0] != asynqPrefix+"active" || keys[1] != asynqPrefix+"lease" {
		return ""
	}
	return keys[2]
}
