package flow

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/flow/flowdb"
)

// Every worker publishes its view of the active keys once a second (a hash
// per worker, living a few seconds); GET /flows and the metrics add them
// up. Only the busiest MaxPublished keys of a worker are published.

const (
	// MaxPublished bounds the keys one worker publishes.
	MaxPublished = 200
)

// KeyStats is one key's state as published by a worker, or summed over
// workers.
type KeyStats struct {
	Key string `json:"key"`
	// Named: a flowControl.key, not a destination's own host:port.
	Named       bool  `json:"named,omitempty"`
	InFlight    int   `json:"inFlight"`
	Parked      int   `json:"parked"` // parks in the last second
	Parallelism int   `json:"parallelism,omitempty"`
	Rate        int   `json:"rate,omitempty"`
	PeriodMs    int64 `json:"periodMs,omitempty"`
	// EffectiveRate is the adaptive limit per second (summed over the
	// workers that have one); 0 means not limited.
	EffectiveRate float64 `json:"effectiveRate"`
	Succeeded     int     `json:"succeeded"`  // in the last minute or two
	Overloaded    int     `json:"overloaded"` // ditto
	Failed        int     `json:"failed"`     // ditto, failures other than overload
}

// snapshot is this worker's keys, busiest first, forgetting idle ones.
func (c *Controller) snapshot(now time.Time) []KeyStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]KeyStats, 0, len(c.cut.keys))
	for name, k := range c.cut.keys {
		if k.inflight == 0 && k.lim == nil && k.lineSeen.IsZero() && now.Sub(k.lastUsed) > c.tune.ForgetAfter {
			delete(c.cut.keys, name)
			continue
		}
		s := KeyStats{Key: name, Named: k.spec.Named, InFlight: k.inflight, Parked: k.parked, Parallelism: k.spec.Parallelism, Rate: k.spec.Rate,
			Succeeded: k.ok + k.prevOK, Overloaded: k.overloaded + k.prevOver, Failed: k.failed + k.prevFailed}
		if k.spec.Rate > 0 {
			s.PeriodMs = k.spec.Period.Milliseconds()
		}
		if k.lim != nil {
			s.EffectiveRate = float64(k.lim.Limit())
		}
		k.parked = 0
		out = append(out, s)
	}
	for name, h := range c.fair.hosts {
		if h.inflight == 0 && h.taking == 0 && (h.lineSeen.IsZero() || now.Sub(h.lineSeen) > c.tune.LineMemory) && len(h.woken) == 0 {
			delete(c.fair.hosts, name)
		}
	}
	sort.Slice(out, func(i, j int) bool { return activity(out[i]) > activity(out[j]) })
	if len(out) > MaxPublished {
		out = out[:MaxPublished]
	}
	return out
}

func activity(s KeyStats) int { return s.InFlight*1000 + s.Parked*100 + s.Succeeded + s.Overloaded }

// Publish writes this worker's keys for GET /flows every PublishEvery
// until ctx ends. A worker with no keys to show writes once that it has
// none, then nothing (Read needs no entry of it): an idle worker's five
// commands a second were a tenth of its idle cost.
func (c *Controller) Publish(ctx context.Context, worker string) {
	shown := true // whether Redis may hold keys of this worker
	clock.Every(ctx, c.clk, c.tune.PublishEvery, func() {
		now := c.now()
		stats := c.snapshot(now)
		if len(stats) == 0 && !shown {
			return
		}
		fields := make([]any, 0, 2*len(stats))
		for _, s := range stats {
			b, _ := json.Marshal(s)
			fields = append(fields, s.Key, string(b))
		}
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := c.db.Stats.PublishKeys(wctx, worker, fields, now, c.tune.StaleAfter); err != nil {
			c.log.Debug("could not publish flow-control state", "err", err)
		} else {
			shown = len(stats) > 0
		}
		cancel()
	})
}

// Read sums what the live workers published, per key, busiest first. For
// keys with a parallelism, the slots taken and the requests waiting come
// from Redis itself (all workers' truth).
func Read(ctx context.Context, rdb redis.UniversalClient, now time.Time) ([]KeyStats, error) {
	db := flowdb.New(rdb)
	workers, err := db.Stats.LiveWorkers(ctx, now.Add(-DefaultTuning.StaleAfter)) // the API has no controller
	if err != nil {
		return nil, err
	}
	sum := map[string]*KeyStats{}
	for _, w := range workers {
		h, err := db.Stats.WorkerKeys(ctx, w)
		if err != nil {
			return nil, err
		}
		for _, v := range h {
			var s KeyStats
			if json.Unmarshal([]byte(v), &s) != nil {
				continue
			}
			t := sum[s.Key]
			if t == nil {
				t = &KeyStats{Key: s.Key}
				sum[s.Key] = t
			}
			t.InFlight += s.InFlight
			t.Parked += s.Parked
			t.EffectiveRate += s.EffectiveRate
			t.Succeeded += s.Succeeded
			t.Overloaded += s.Overloaded
			t.Failed += s.Failed
			t.Parallelism, t.Rate, t.PeriodMs = max(t.Parallelism, s.Parallelism), max(t.Rate, s.Rate), max(t.PeriodMs, s.PeriodMs)
			t.Named = t.Named || s.Named
		}
	}
	out := make([]KeyStats, 0, len(sum))
	for _, s := range sum {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := activity(out[i]), activity(out[j]); a != b {
			return a > b
		}
		return out[i].Key < out[j].Key
	})
	return out, nil
}

// Slots returns how many parallelism slots of key are taken and how many
// requests wait for one.
func Slots(ctx context.Context, rdb redis.UniversalClient, key string, now time.Time) (taken, waiting int64, err error) {
	return flowdb.New(rdb).Par.Slots(ctx, key, now)
}
