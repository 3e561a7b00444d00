package record

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// Schedule is a recurring request: at every tick of Cron a new request is
// made from Request (the submission's JSON).
type Schedule struct {
	ID string
	// Tenant is whose schedule it is; its requests are that tenant's.
	Tenant     string
	Cron       string
	Timezone   string
	CatchUp    string // none or last
	Request    []byte
	Paused     bool
	NextFireAt time.Time
	CreatedAt  time.Time
	Fires      []Fire // newest first
	// QStash is set on schedules made through the QStash-compatible API.
	QStash *ScheduleQStash
}

// ScheduleQStash is what a QStash schedule adds: the id its client chose
// (Upstash-Schedule-Id) and what each tick's message carries beyond
// retryd's submission.
type ScheduleQStash struct {
	// Alias is the id the client chose; "" when it took retryd's.
	Alias   string `json:"alias,omitempty"`
	DelayMs int64  `json:"delayMs,omitempty"`
	// Message is copied onto each tick's request.
	Message QStash `json:"message"`
}

// ScheduleAliasKey is the partition key of a QStash schedule id: a
// schedule with an alias lives in the partition it picks, next to the
// alias' own key.
func ScheduleAliasKey(alias string) string { return "qstash-schedule:" + alias }

// Fire is one tick that produced a request.
type Fire struct {
	FireTime  time.Time `json:"-"`
	FireMs    int64     `json:"fireMs"`
	RequestID string    `json:"requestId"`
}

// MaxFires is how many fires a schedule remembers.
const MaxFires = 100

// CreateSchedule stores a new schedule and makes it due at NextFireAt.
func (s *Store) CreateSchedule(ctx context.Context, sc *Schedule) error {
	if err := s.register(ctx, sc.Tenant); err != nil {
		return err
	}
	if err := s.noteScheduleChange(ctx); err != nil {
		return err
	}
	k := s.k(sc.ID)
	tk := k.of(sc.Tenant)
	pipe := s.rdb.TxPipeline()
	pipe.HSet(ctx, k.schedule(sc.ID), "cron", sc.Cron, "timezone", sc.Timezone, "catchUp", sc.CatchUp,
		"request", string(sc.Request), "paused", "0", "nextFireAt", sc.NextFireAt.UnixMilli(), "createdAt", sc.CreatedAt.UnixMilli())
	if t := tenant.Of(sc.Tenant); t != tenant.Default {
		pipe.HSet(ctx, k.schedule(sc.ID), fTenant, t)
	}
	if q := sc.QStash; q != nil {
		b, _ := json.Marshal(q)
		pipe.HSet(ctx, k.schedule(sc.ID), "qstash", string(b))
		if q.Alias != "" {
			pipe.Set(ctx, tk.scheduleAlias(q.Alias), sc.ID, 0)
		}
	}
	pipe.ZAdd(ctx, tk.schedules(), redis.Z{Member: sc.ID})
	pipe.ZAdd(ctx, k.scheduleDue(), redis.Z{Score: float64(sc.NextFireAt.UnixMilli()), Member: sc.ID})
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap(err)
	}
	return s.noteScheduleChange(ctx)
}

// GetSchedule returns a schedule with its recent fires.
func (s *Store) GetSchedule(ctx context.Context, id string) (*Schedule, error) {
	pipe := s.rdb.Pipeline()
	h := pipe.HGetAll(ctx, s.k(id).schedule(id))
	fires := pipe.LRange(ctx, s.k(id).scheduleFires(id), 0, MaxFires-1)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, wrap(err)
	}
	if len(h.Val()) == 0 {
		return nil, ErrNotFound
	}
	return decodeSchedule(id, h.Val(), fires.Val()), nil
}

// GetScheduleIn is GetSchedule for a caller of scope: another tenant's
// schedule is ErrNotFound.
func (s *Store) GetScheduleIn(ctx context.Context, scope tenant.Scope, id string) (*Schedule, error) {
	sc, err := s.GetSchedule(ctx, id)
	if err != nil {
		return nil, err
	}
	if !scope.Has(sc.Tenant) {
		return nil, ErrNotFound
	}
	return sc, nil
}

func decodeSchedule(id string, h map[string]string, fires []string) *Schedule {
	sc := &Schedule{
		ID: id, Tenant: tenant.Of(h[fTenant]), Cron: h["cron"], Timezone: h["timezone"], CatchUp: h["catchUp"], Request: []byte(h["request"]),
		Paused: h["paused"] == "1", NextFireAt: fromMs(h["nextFireAt"]), CreatedAt: fromMs(h["createdAt"]),
		Fires: []Fire{},
	}
	if q := h["qstash"]; q != "" {
		sc.QStash = &ScheduleQStash{}
		_ = json.Unmarshal([]byte(q), sc.QStash)
	}
	for _, f := range fires {
		var fire Fire
		if json.Unmarshal([]byte(f), &fire) == nil {
			fire.FireTime = time.UnixMilli(fire.FireMs).UTC()
			sc.Fires = append(sc.Fires, fire)
		}
	}
	return sc
}

// ListSchedules returns the schedules of scope newest first after cursor.
func (s *Store) ListSchedules(ctx context.Context, scope tenant.Scope, cursor string, limit int) ([]*Schedule, string, error) {
	tenants, err := s.tenantsIn(ctx, scope)
	if err != nil || len(tenants) == 0 {
		return []*Schedule{}, "", err
	}
	var indexes []func(keys) string
	for _, t := range tenants {
		indexes = append(indexes, func(k keys) string { return k.of(t).schedules() })
	}
	ids, err := s.newest(ctx, cursor, int64(limit)+1, indexes...)
	if err != nil {
		return nil, "", wrap(err)
	}
	next := ""
	if len(ids) > limit {
		ids = ids[:limit]
		next = ids[limit-1]
	}
	out := []*Schedule{}
	for _, id := range ids {
		sc, err := s.GetScheduleIn(ctx, scope, id)
		if err != nil {
			continue
		}
		out = append(out, sc)
	}
	return out, next, nil
}

// ScheduleByAlias returns the id of the QStash schedule tenant t's client
// named alias, or ErrNotFound. Each tenant names its own schedules.
func (s *Store) ScheduleByAlias(ctx context.Context, t, alias string) (string, error) {
	k := keysOf(s.parts.Tag(s.parts.OfKey(ScheduleAliasKey(alias))))
	id, err := s.rdb.Get(ctx, k.of(t).scheduleAlias(alias)).Result()
	if err == redis.Nil {
		return "", ErrNotFound
	}
	return id, wrap(err)
}

// DeleteSchedule removes a schedule of scope (and its QStash alias);
// requests it already made stay.
func (s *Store) DeleteSchedule(ctx context.Context, scope tenant.Scope, id string) error {
	k := s.k(id)
	v, err := s.rdb.HMGet(ctx, k.schedule(id), "qstash", fTenant).Result()
	if err != nil {
		return wrap(err)
	}
	t, _ := v[1].(string)
	if !scope.Has(t) {
		return ErrNotFound
	}
	tk := k.of(t)
	if q, _ := v[0].(string); q != "" {
		var sq ScheduleQStash
		if json.Unmarshal([]byte(q), &sq) == nil && sq.Alias != "" {
			if err := s.rdb.Del(ctx, tk.scheduleAlias(sq.Alias)).Err(); err != nil {
				return wrap(err)
			}
		}
	}
	pipe := s.rdb.TxPipeline()
	del := pipe.Del(ctx, k.schedule(id), k.scheduleFires(id))
	pipe.ZRem(ctx, tk.schedules(), id)
	pipe.ZRem(ctx, k.scheduleDue(), id)
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap(err)
	}
	if del.Val() == 0 {
		return ErrNotFound
	}
	return nil
}

// pauseScript: scripts/pause_schedule.lua.
var pauseScript = script("pause_schedule")

// SetPaused pauses a schedule, or resumes it from next (a paused schedule
// does not replay the ticks it missed).
func (s *Store) SetPaused(ctx context.Context, id string, paused bool, next time.Time) error {
	flag := "0"
	if paused {
		flag = "1"
	} else if err := s.noteScheduleChange(ctx); err != nil {
		return err
	}
	n, err := pauseScript.Run(ctx, s.rdb, []string{s.k(id).schedule(id), s.k(id).scheduleDue()}, id, flag, next.UnixMilli()).Int()
	if err != nil {
		return wrap(err)
	}
	if n == 0 {
		return ErrNotFound
	}
	if !paused {
		return s.noteScheduleChange(ctx)
	}
	return nil
}

// noteScheduleChange marks a change that can make a schedule due sooner
// than the schedulers know. It is marked before the change is stored (a
// change that then fails only costs a look) and again after, so a
// scheduler that read the first mark before the change landed sees the
// second after it. Each mark is a new random value, never a count a
// failover could bring back to one a scheduler already saw.
func (s *Store) noteScheduleChange(ctx context.Context) error {
	return wrap(s.rdb.Set(ctx, ScheduleChangesKey, strconv.FormatUint(rand.Uint64(), 36), 0).Err())
}

// ScheduleChanges is the last mark noteScheduleChange made ("" for none).
func (s *Store) ScheduleChanges(ctx context.Context) (string, error) {
	v, err := s.rdb.Get(ctx, ScheduleChangesKey).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, wrap(err)
}

// DueSchedules returns up to n ids per partition of schedules due at now,
// and the earliest fire time after now (zero: none). One command per
// partition: the first n entries by fire time hold both.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, n int) ([]string, time.Time, error) {
	var due []string
	var next time.Time
	for _, k := range s.each() {
		first, err := s.rdb.ZRangeWithScores(ctx, k.scheduleDue(), 0, int64(n)).Result()
		if err != nil {
			return nil, time.Time{}, wrap(err)
		}
		for _, z := range first {
			at := time.UnixMilli(int64(z.Score))
			if at.After(now) {
				if next.IsZero() || at.Before(next) {
					next = at
				}
				break
			}
			if id, ok := z.Member.(string); ok && len(due) < n*s.parts.Len() {
				due = append(due, id)
			}
		}
	}
	return due, next, nil
}

// advanceScript: scripts/advance_schedule.lua.
var advanceScript = script("advance_schedule")

// AdvanceSchedule moves schedule id from tick from to tick next, recording
// fires. It returns false when another replica advanced it first.
func (s *Store) AdvanceSchedule(ctx context.Context, id string, from, next time.Time, fires []Fire) (bool, error) {
	args := []any{id, from.UnixMilli(), next.UnixMilli(), MaxFires}
	for _, f := range fires {
		f.FireMs = f.FireTime.UnixMilli()
		b, _ := json.Marshal(f)
		args = append(args, string(b))
	}
	n, err := advanceScript.Run(ctx, s.rdb, []string{s.k(id).schedule(id), s.k(id).scheduleDue(), s.k(id).scheduleFires(id)}, args...).Int()
	return n == 1, wrap(err)
}
