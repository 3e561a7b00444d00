// Package agree tells every retryd process on one Redis whether the others
// decide requests' fates as it does. Each process records in Redis the
// settings that decide a request's fate there (config.Config.Fate:
// destination rules, the limits it enforces, the ids of its signing
// secrets), renews them every Every, and reads everyone's back: a setting
// that two processes read with different values is a Disagreement, logged
// when it appears and shown by /readyz. Nothing here runs per request:
// the last reading is kept in memory, and Explain, which a worker adds to
// a refused destination's error, reads only that.
package agree

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/retryd/retryd/internal/clock"
	"github.com/retryd/retryd/internal/config"
)

// Renewal timings: a process learns of another's settings within Every; a
// process that stopped without saying so is forgotten after TTL.
const (
	Every = 10 * time.Second
	TTL   = 45 * time.Second
)

// Registry is where processes record their settings (record.Store).
type Registry interface {
	Settings(ctx context.Context, id, entry string, ttl time.Duration) (map[string]string, error)
	ForgetSettings(ctx context.Context, ids ...string) error
}

// Process is one retryd process and the settings it recorded.
type Process struct {
	ID       string            `json:"id"`
	Program  config.Program    `json:"program"`
	Name     string            `json:"name"` // host:pid
	Settings map[string]string `json:"settings"`
	Until    int64             `json:"until"` // ms: when the entry lapses
}

// Label names p in a message: "worker host:pid".
func (p Process) Label() string { return string(p.Program) + " " + p.Name }

// Self is this process as program reads cfg.
func Self(cfg config.Config, program config.Program) Process {
	host, _ := os.Hostname()
	name := fmt.Sprintf("%s:%d", host, os.Getpid())
	return Process{ID: fmt.Sprintf("%s %s %d", program, name, time.Now().UnixNano()), Program: program, Name: name,
		Settings: cfg.Fate(program)}
}

// Disagreement is a setting that processes read with different values.
type Disagreement struct {
	Setting string
	// Values maps each value to the processes that have it.
	Values map[string][]string
}

// String names the setting and who has which value:
// "ALLOW_PRIVATE_TARGETS: true (api h:1), false (worker h:2)".
func (d Disagreement) String() string {
	vals := make([]string, 0, len(d.Values))
	for v := range d.Values {
		vals = append(vals, v)
	}
	sort.Strings(vals)
	parts := make([]string, len(vals))
	for i, v := range vals {
		parts[i] = fmt.Sprintf("%s (%s)", v, strings.Join(d.Values[v], ", "))
	}
	return d.Setting + ": " + strings.Join(parts, ", ")
}

// Book keeps this process's entry in the registry and the last reading of
// everyone's.
type Book struct {
	registry Registry
	self     Process
	clock    clock.Clock
	log      *slog.Logger

	mu     sync.Mutex
	others []Process
	said   string // the disagreements last logged
}

// New returns a Book recording self in registry.
func New(registry Registry, self Process, c clock.Clock, log *slog.Logger) *Book {
	return &Book{registry: registry, self: self, clock: c, log: log}
}

// Refresh renews this process's entry, reads everyone's, and logs the
// disagreements when they differ from the last ones logged.
func (b *Book) Refresh(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	now := b.clock.Now()
	self := b.self
	self.Until = now.Add(TTL).UnixMilli()
	entry, err := json.Marshal(self)
	if err != nil {
		return fmt.Errorf("record settings: %w", err)
	}
	all, err := b.registry.Settings(ctx, self.ID, string(entry), TTL)
	if err != nil {
		return fmt.Errorf("record settings: %w", err)
	}
	var others []Process
	var lapsed []string
	for id, raw := range all {
		var p Process
		if json.Unmarshal([]byte(raw), &p) != nil || p.Until < now.UnixMilli() {
			lapsed = append(lapsed, id)
			continue
		}
		if id != self.ID {
			others = append(others, p)
		}
	}
	sort.Slice(others, func(i, j int) bool { return others[i].Label() < others[j].Label() })
	if err := b.registry.ForgetSettings(ctx, lapsed...); err != nil {
		b.log.Debug("could not drop the settings of stopped processes; the next renewal will", "err", err)
	}
	b.mu.Lock()
	b.others = others
	ds := b.disagreementsLocked()
	said := strings.Join(ds, "; ")
	changed := said != b.said
	b.said = said
	b.mu.Unlock()
	if changed {
		if said == "" {
			b.log.Info("every retryd process on this Redis now decides requests' fates with the same settings")
		} else {
			b.log.Warn("retryd processes on this Redis disagree on settings that decide a request's fate; "+
				"give every process the same value (docs/operating.md lists which program reads which)", "disagreements", said)
		}
	}
	return nil
}

// Run renews every Every until ctx ends, then removes this process's
// entry (a process killed instead leaves it to lapse).
func (b *Book) Run(ctx context.Context) {
	for clock.Sleep(ctx, b.clock, Every) == nil {
		if err := b.Refresh(ctx); err != nil && ctx.Err() == nil {
			b.log.Warn("could not renew this process's settings in Redis; keeping the last reading", "err", err)
		}
	}
	fctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := b.registry.ForgetSettings(fctx, b.self.ID); err != nil {
		b.log.Debug("could not remove this process's settings from Redis; they lapse on their own", "err", err, "after", TTL)
	}
}

// Disagreements are the settings, as last read, that this process and
// the others (or the others among themselves) read with different
// values, one sentence each.
func (b *Book) Disagreements() []string {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.disagreementsLocked()
}

func (b *Book) disagreementsLocked() []string {
	all := append([]Process{b.self}, b.others...)
	var names []string
	for _, p := range all {
		for name := range p.Settings {
			if !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	sort.Strings(names)
	var out []string
	for _, name := range names {
		d := Disagreement{Setting: name, Values: map[string][]string{}}
		for _, p := range all {
			if v, ok := p.Settings[name]; ok {
				d.Values[v] = append(d.Values[v], p.Label())
			}
		}
		if len(d.Values) > 1 {
			out = append(out, d.String())
		}
	}
	return out
}

// Explain says how the other program's processes read settings
// differently from this one, for an error that those settings decided:
// "this worker has ALLOW_PRIVATE_TARGETS=false, the API that accepted it
// had true". It is "" when they agree, and reads only the last reading.
func (b *Book) Explain(settings ...string) string {
	if b == nil {
		return ""
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var parts []string
	for _, name := range settings {
		own, ok := b.self.Settings[name]
		if !ok {
			continue
		}
		var theirs []string
		for _, p := range b.others {
			if v, ok := p.Settings[name]; ok && p.Program != b.self.Program && v != own && !slices.Contains(theirs, v) {
				theirs = append(theirs, v)
			}
		}
		if len(theirs) == 0 {
			continue
		}
		self, other := "worker", "the API that accepted it had "
		if b.self.Program == config.API {
			self, other = "API", "the workers on this Redis have "
		}
		parts = append(parts, fmt.Sprintf("this %s has %s=%s, %s%s", self, name, own, other, strings.Join(theirs, " or ")))
	}
	return strings.Join(parts, "; ")
}
