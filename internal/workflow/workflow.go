// Package workflow keeps the runs of Upstash Workflow: for each run, the
// log of the messages published to it. A workflow is a chain of
// deliveries to one endpoint, each carrying the steps so far; the SDK in
// the endpoint replays them and runs the next step. The messages
// themselves are ordinary requests (records, retries, flow control, the
// DLQ); what this package adds is the log each delivery's body is made
// of, and the run's end.
package workflow

import (
	"context"
	"crypto/sha1"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/luascript"
	"github.com/retryd/retryd/internal/tenant"
)

//go:embed scripts/*.lua
var scripts embed.FS

var (
	appendScript = luascript.Load(scripts, "", "append")
	dropScript   = luascript.Load(scripts, "", "drop")
)

// Limits of one run's log: every delivery of the run carries it whole.
const (
	MaxLogBytes   = 8 << 20
	MaxLogEntries = 1000
)

// DefaultKeep is how long a run is kept after its last message when the
// store is given no retention.
const DefaultKeep = 30 * 24 * time.Hour

// Call types of a log entry, as the SDKs name them: a step of the
// workflow, a call to a third party, and that call's answer.
const (
	CallStep         = "step"
	CallToCallback   = "toCallback"
	CallFromCallback = "fromCallback"
)

// Entry is one message of a run's log, as a delivery's body and GET
// /v2/workflows/runs/{id} show it: the body base64-encoded.
type Entry struct {
	MessageID string `json:"messageId"`
	Body      string `json:"body"`
	CallType  string `json:"callType"`
}

// ErrNoRun is a step published to a run that was never started, or has
// ended.
var ErrNoRun = errors.New("workflow run not found (never started, or ended)")

// URLConflictError is a message to a run that another URL started.
type URLConflictError struct{ Run, URL string }

func (e *URLConflictError) Error() string {
	return fmt.Sprintf("workflow run %s runs at another URL (%s)", e.Run, e.URL)
}

// LogFullError is a message that would take a run's log past its limits.
type LogFullError struct {
	Run            string
	Bytes, Entries int
}

func (e *LogFullError) Error() string {
	return fmt.Sprintf("workflow run %s: its log would hold %d bytes in %d entries, more than %d bytes or %d entries; each delivery of a run carries its whole log",
		e.Run, e.Bytes, e.Entries, MaxLogBytes, MaxLogEntries)
}

// Store holds the runs' logs in Redis.
type Store struct {
	rdb redis.UniversalClient
	// Keep is how long a run lasts after its last message (the records'
	// retention); zero is DefaultKeep.
	Keep time.Duration
}

// New is a store over rdb.
func New(rdb redis.UniversalClient, keep time.Duration) *Store {
	if keep <= 0 {
		keep = DefaultKeep
	}
	return &Store{rdb: rdb, Keep: keep}
}

// runKeys are run's keys of tenant t: its hash and its log, in one slot.
func runKeys(t, run string) []string {
	sum := sha1.Sum([]byte(tenant.Of(t) + "\x00" + run))
	tag := "{retryd-wf:" + hex.EncodeToString(sum[:10]) + "}:"
	return []string{tag + "run", tag + "log"}
}

// Message is one message published to a run.
type Message struct {
	Tenant, Run string
	// Init starts the run.
	Init bool
	// URL is the workflow's; "" for a message to another (a call to a
	// third party).
	URL      string
	ID       string
	Body     []byte
	CallType string
}

// Added is what Add made of a message.
type Added struct {
	// Duplicate is an init of a run already started: FirstID is the
	// message that started it, and nothing was added.
	Duplicate bool
	FirstID   string
	// Entry is the entry added (Drop takes it back).
	Entry string
}

// Add appends m to its run's log, starting the run when m is its init.
func (s *Store) Add(ctx context.Context, m Message, now time.Time) (Added, error) {
	ct := m.CallType
	if ct == "" {
		ct = CallStep
	}
	e, err := json.Marshal(Entry{MessageID: m.ID, Body: base64.StdEncoding.EncodeToString(m.Body), CallType: ct})
	if err != nil {
		return Added{}, fmt.Errorf("encode the log entry of %s: %w", m.ID, err)
	}
	kind := "step"
	if m.Init {
		kind = "init"
	}
	res, err := appendScript.Run(ctx, s.rdb, runKeys(m.Tenant, m.Run), kind, m.URL, e, m.ID, now.UnixMilli(),
		s.Keep.Milliseconds(), MaxLogBytes, MaxLogEntries).StringSlice()
	if err != nil {
		return Added{}, fmt.Errorf("add %s to workflow run %s: %w", m.ID, m.Run, err)
	}
	switch {
	case len(res) == 2 && res[0] == "ok":
		return Added{Entry: string(e)}, nil
	case len(res) == 2 && res[0] == "dup":
		return Added{Duplicate: true, FirstID: res[1]}, nil
	case len(res) == 2 && res[0] == "url":
		return Added{}, &URLConflictError{Run: m.Run, URL: res[1]}
	case len(res) == 1 && res[0] == "missing":
		return Added{}, fmt.Errorf("workflow run %s: %w", m.Run, ErrNoRun)
	case len(res) == 3 && res[0] == "full":
		b, _ := strconv.Atoi(res[1])
		n, _ := strconv.Atoi(res[2])
		return Added{}, &LogFullError{Run: m.Run, Bytes: b, Entries: n}
	}
	return Added{}, fmt.Errorf("add %s to workflow run %s: unexpected reply %q", m.ID, m.Run, res)
}

// Drop takes back entry (Added.Entry) of run, whose message was refused
// after it was added.
func (s *Store) Drop(ctx context.Context, t, run, entry string) error {
	if err := dropScript.Run(ctx, s.rdb, runKeys(t, run), entry).Err(); err != nil {
		return fmt.Errorf("take back an entry of workflow run %s: %w", run, err)
	}
	return nil
}

// Run is what a delivery of a run reads of it.
type Run struct {
	// Found is false when the run has ended (or never was).
	Found     bool
	CreatedAt time.Time
	// Log is the run's entries up to and including the message asked for
	// (all of them when it is not among them), as JSON.
	Log []byte
}

// Steps reads run's log as message id's delivery carries it.
func (s *Store) Steps(ctx context.Context, t, run, id string) (Run, error) {
	k := runKeys(t, run)
	var created *redis.StringCmd
	var lr *redis.StringSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		created = p.HGet(ctx, k[0], "createdAt")
		lr = p.LRange(ctx, k[1], 0, -1)
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return Run{}, fmt.Errorf("read workflow run %s: %w", run, err)
	}
	if errors.Is(created.Err(), redis.Nil) {
		return Run{}, nil
	}
	entries := lr.Val()
	for i, e := range entries {
		var x struct {
			MessageID string `json:"messageId"`
		}
		if json.Unmarshal([]byte(e), &x) == nil && x.MessageID == id {
			entries = entries[:i+1]
			break
		}
	}
	ms, _ := strconv.ParseInt(created.Val(), 10, 64)
	return Run{Found: true, CreatedAt: time.UnixMilli(ms), Log: joinJSON(entries)}, nil
}

// joinJSON is entries, each a JSON value, as one JSON array.
func joinJSON(entries []string) []byte {
	n := 2
	for _, e := range entries {
		n += len(e) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '[')
	for i, e := range entries {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, e...)
	}
	return append(b, ']')
}

// End deletes run and returns the ids of the messages published to it,
// whose pending ones the caller cancels when the run is canceled. ok is
// false when there was no such run.
func (s *Store) End(ctx context.Context, t, run string) (ids []string, ok bool, err error) {
	k := runKeys(t, run)
	var lr *redis.StringSliceCmd
	var del *redis.IntCmd
	_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		lr = p.LRange(ctx, k[1], 0, -1)
		del = p.Del(ctx, k[0], k[1])
		return nil
	})
	if err != nil {
		return nil, false, fmt.Errorf("end workflow run %s: %w", run, err)
	}
	for _, e := range lr.Val() {
		var x Entry
		if json.Unmarshal([]byte(e), &x) == nil && x.MessageID != "" {
			ids = append(ids, x.MessageID)
		}
	}
	return ids, del.Val() > 0, nil
}
