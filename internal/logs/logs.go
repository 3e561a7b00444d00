// Package logs builds retryd's one log format: slog (JSON, or text on a
// terminal), with asynq's and go-redis' own lines routed into it, and
// repeats of the same warning or error summarised instead of written again
// and again (during a Redis outage every poll fails the same way).
package logs

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// Window is how long a repeated line is held back: the first of a kind is
// written, the rest within Window are counted, and the next one after it
// carries "repeated": n.
const Window = 10 * time.Second

// Dedup wraps h so that warnings and errors with the same message (and
// component) are written once per Window with a count of the ones left
// out. Info and debug lines pass as they are.
func Dedup(h slog.Handler) slog.Handler {
	return &dedup{next: h, state: &dedupState{seen: map[string]*seen{}}, now: time.Now}
}

type seen struct {
	first   time.Time
	dropped int
}

type dedupState struct {
	mu   sync.Mutex
	seen map[string]*seen
}

type dedup struct {
	next  slog.Handler
	state *dedupState
	group string // the attrs this handler was built With, as a key prefix
	now   func() time.Time
}

func (d *dedup) Enabled(ctx context.Context, l slog.Level) bool { return d.next.Enabled(ctx, l) }

func (d *dedup) Handle(ctx context.Context, r slog.Record) error {
	if r.Level < slog.LevelWarn {
		return d.next.Handle(ctx, r)
	}
	key := d.group + "|" + r.Message
	now := d.now()
	d.state.mu.Lock()
	s := d.state.seen[key]
	switch {
	case s == nil || now.Sub(s.first) >= Window:
		dropped := 0
		if s != nil {
			dropped = s.dropped
		}
		d.state.seen[key] = &seen{first: now}
		if len(d.state.seen) > 10000 {
			for k, v := range d.state.seen {
				if now.Sub(v.first) >= Window {
					delete(d.state.seen, k)
				}
			}
		}
		d.state.mu.Unlock()
		if dropped > 0 {
			r.AddAttrs(slog.Int("repeated", dropped), slog.String("repeatedWithin", Window.String()))
		}
		return d.next.Handle(ctx, r)
	default:
		s.dropped++
		d.state.mu.Unlock()
		return nil
	}
}

func (d *dedup) WithAttrs(attrs []slog.Attr) slog.Handler {
	var b strings.Builder
	b.WriteString(d.group)
	for _, a := range attrs {
		b.WriteString(a.String())
		b.WriteByte(',')
	}
	return &dedup{next: d.next.WithAttrs(attrs), state: d.state, group: b.String(), now: d.now}
}

func (d *dedup) WithGroup(name string) slog.Handler {
	return &dedup{next: d.next.WithGroup(name), state: d.state, group: d.group + name + ".", now: d.now}
}

// Redis adapts slog to go-redis' logger (redis.SetLogger): its lines are
// warnings of component "go-redis".
type Redis struct{ L *slog.Logger }

// Printf implements go-redis' internal.Logging.
func (r Redis) Printf(ctx context.Context, format string, v ...any) {
	r.L.WarnContext(ctx, strings.TrimSpace(fmt.Sprintf(format, v...)))
}
