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
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/luascript"
	"github.com/retryd/retryd/internal/tenant"
)

//go:embed scripts/*.lua
var scripts embed.FS

var (
	publishScript  = luascript.Load(scripts, "", "publish")
	forgetScript   = luascript.Load(scripts, "", "forget")
	deliverScript  = luascript.Load(scripts, "", "deliver")
	returnedScript = luascript.Load(scripts, "", "returned")
)

// Limits of one run: every delivery of the run carries its log whole.
const (
	MaxLogBytes    = 8 << 20
	MaxLogMessages = 1000
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
	return fmt.Sprintf("workflow run %s: its log would hold %d bytes in %d messages, more than %d bytes or %d messages; each delivery of a run carries its whole log",
		e.Run, e.Bytes, e.Entries, MaxLogBytes, MaxLogMessages)
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

// runKeys are run's keys of tenant t, in one slot: its hash, its
// messages (ids, in publish order) and its log (entries, in the order of
// their first delivery).
func runKeys(t, run string) (hash, msgs, log string) {
	tag := runTag(t, run)
	return tag + "run", tag + "msgs", tag + "log"
}

// runScriptKeys are the keys publish.lua and forget.lua take: the run's
// hash, messages and log, what is kept of it once ended, and where a
// start sets the log and that aside.
func runScriptKeys(t, run string) []string {
	h, msgs, log := runKeys(t, run)
	tag := runTag(t, run)
	return []string{h, msgs, log, tag + "ended", tag + "prevlog", tag + "prevended"}
}

// runTag is the prefix, with its hash tag, of run's keys of tenant t.
func runTag(t, run string) string {
	sum := sha1.Sum([]byte(tenant.Of(t) + "\x00" + run))
	return "{retryd-wf:" + hex.EncodeToString(sum[:10]) + "}:"
}

// Message is one message published to a run.
type Message struct {
	Tenant, Run string
	// Init starts the run.
	Init bool
	// URL is the workflow's; "" for a message to another (a call to a
	// third party).
	URL  string
	ID   string
	Body []byte
	// Due is how long until the message is due: the run is kept until
	// then, and a retention after.
	Due time.Duration
	// Invoker, for an init, is the step of another run that invoked
	// this one (opaque here: package invoke reads it), kept with the run
	// so its end can return its result there.
	Invoker []byte
	// Config, for an init, is what the run's later steps inherit of it
	// (opaque here), as the SDKs expect the server to keep.
	Config []byte
}

// Published is what Publish made of a message.
type Published struct {
	// Duplicate is an init of a run already started: FirstID is the
	// message that started it, and nothing was counted.
	Duplicate bool
	FirstID   string
}

// entry is m's entry in its run's log.
// Only steps are delivered to the workflow, so every entry is one.
func entry(id string, body []byte) ([]byte, error) {
	e, err := json.Marshal(Entry{MessageID: id, Body: base64.StdEncoding.EncodeToString(body), CallType: CallStep})
	if err != nil {
		return nil, fmt.Errorf("encode the log entry of %s: %w", id, err)
	}
	return e, nil
}

// Publish counts m among its run's messages, starting the run when m is
// its init. m joins the log when it is first delivered (Deliver). A
// message retryd then refuses is taken back with Forget.
func (s *Store) Publish(ctx context.Context, m Message, now time.Time) (Published, error) {
	kind := "init"
	if !m.Init {
		kind = "step"
	}
	res, err := publishScript.Run(ctx, s.rdb, runScriptKeys(m.Tenant, m.Run), kind, m.URL, Size(m), m.ID, now.UnixMilli(),
		s.Keep.Milliseconds(), MaxLogBytes, MaxLogMessages, max(m.Due, 0).Milliseconds(), m.Invoker, m.Config).StringSlice()
	if err != nil {
		return Published{}, fmt.Errorf("publish %s to workflow run %s: %w", m.ID, m.Run, err)
	}
	switch {
	case len(res) == 1 && res[0] == "ok":
		if m.Init {
			// Listed once started: a start not listed is taken back, as
			// one retryd refuses.
			if err := s.index(ctx, m.Tenant, m.Run, now, false); err != nil {
				if ferr := s.Forget(ctx, m); ferr != nil {
					return Published{}, fmt.Errorf("%w (and taking the start back: %w)", err, ferr)
				}
				return Published{}, err
			}
		}
		return Published{}, nil
	case len(res) == 2 && res[0] == "dup":
		// A start repeated after its listing failed lists it; one listed
		// keeps its place.
		return Published{Duplicate: true, FirstID: res[1]}, s.index(ctx, m.Tenant, m.Run, now, true)
	case len(res) == 2 && res[0] == "url":
		return Published{}, &URLConflictError{Run: m.Run, URL: res[1]}
	case len(res) == 1 && res[0] == "missing":
		return Published{}, fmt.Errorf("workflow run %s: %w", m.Run, ErrNoRun)
	case len(res) == 3 && res[0] == "full":
		b, _ := strconv.Atoi(res[1])
		n, _ := strconv.Atoi(res[2])
		return Published{}, &LogFullError{Run: m.Run, Bytes: b, Entries: n}
	}
	return Published{}, fmt.Errorf("publish %s to workflow run %s: unexpected reply %q", m.ID, m.Run, res)
}

// Size is the bytes m adds to its run's log: its entry (the base64 body
// and the entry's frame), none when it is not to the workflow.
func Size(m Message) int {
	if m.URL == "" {
		return 0
	}
	return base64.StdEncoding.EncodedLen(len(m.Body)) + len(m.ID) + 64
}

// Forget takes back m, which Publish counted and retryd then refused: an
// init's run goes (it never started), a step leaves the run's count.
func (s *Store) Forget(ctx context.Context, m Message) error {
	if err := forgetScript.Run(ctx, s.rdb, runScriptKeys(m.Tenant, m.Run), m.ID, Size(m), s.Keep.Milliseconds()).Err(); err != nil {
		return fmt.Errorf("take %s back from workflow run %s: %w", m.ID, m.Run, err)
	}
	return nil
}

// Info reads run's state without its log: whether it runs (started and
// not ended), since when, at which URL, what invoked it and what its
// steps inherit.
func (s *Store) Info(ctx context.Context, t, run string) (Run, error) {
	h, _, _ := runKeys(t, run)
	v, err := s.rdb.HMGet(ctx, h, "createdAt", "url", "invoker", "config", "returned").Result()
	if err != nil {
		return Run{}, fmt.Errorf("read workflow run %s: %w", run, err)
	}
	r := runOf(v[0], v[1], nil)
	if !r.Found {
		return r, nil
	}
	if inv, _ := v[2].(string); inv != "" {
		r.Invoker = []byte(inv)
	}
	if cfg, _ := v[3].(string); cfg != "" {
		r.Config = []byte(cfg)
	}
	r.Returned = v[4] != nil
	return r, nil
}

// MarkReturned marks run's result returned to the run that invoked it.
func (s *Store) MarkReturned(ctx context.Context, t, run string) error {
	h, _, _ := runKeys(t, run)
	if err := returnedScript.Run(ctx, s.rdb, []string{h}).Err(); err != nil {
		return fmt.Errorf("mark workflow run %s returned: %w", run, err)
	}
	return nil
}

// runOf is a run of the createdAt and url fields its hash holds (nil or
// "" when it has none), and its log's entries.
func runOf(created, url any, entries []string) Run {
	c, _ := created.(string)
	if c == "" {
		return Run{}
	}
	u, _ := url.(string)
	r := Run{Found: true, CreatedAt: msTime(c), URL: u}
	if entries != nil {
		r.Log = joinJSON(entries)
	}
	return r
}

// Run is what a delivery of a run reads of it.
type Run struct {
	// Found is false when the run has ended (or never was).
	Found     bool
	CreatedAt time.Time
	// URL is the workflow's (Steps and Info read it; Deliver does not).
	URL string
	// Invoker is the step of another run that invoked this one (Info
	// reads it); nil when none did.
	Invoker []byte
	// Config is what the run's steps inherit of its start (Info reads
	// it).
	Config []byte
	// Returned says its result went back to the run that invoked it
	// (Info reads it).
	Returned bool
	// Log is the run's entries up to and including the message asked for
	// (all of them when it is not among them), as JSON.
	Log []byte
}

// Deliver is the log message id (whose body is body) carries to the
// workflow: the message joins the log at its first delivery, and carries
// the entries up to and including its own.
func (s *Store) Deliver(ctx context.Context, t, run, id string, body []byte) (Run, error) {
	e, err := entry(id, body)
	if err != nil {
		return Run{}, err
	}
	h, _, log := runKeys(t, run)
	res, err := deliverScript.Run(ctx, s.rdb, []string{h, log}, `"messageId":"`+id+`"`, e).StringSlice()
	if err != nil {
		return Run{}, fmt.Errorf("read workflow run %s for %s: %w", run, id, err)
	}
	switch {
	case len(res) == 1 && res[0] == "missing":
		return Run{}, nil
	case len(res) >= 2 && res[0] == "ok":
		return runOf(res[1], nil, res[2:]), nil
	}
	return Run{}, fmt.Errorf("read workflow run %s for %s: unexpected reply %q", run, id, res)
}

// Steps reads run's log as it stands: up to and including message id
// when id is among its entries (a step's failure callback replays what
// the step was delivered with), all of it otherwise.
func (s *Store) Steps(ctx context.Context, t, run, id string) (Run, error) {
	h, _, log := runKeys(t, run)
	var state *redis.SliceCmd
	var lr *redis.StringSliceCmd
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		state = p.HMGet(ctx, h, "createdAt", "url")
		lr = p.LRange(ctx, log, 0, -1)
		return nil
	})
	if err != nil {
		return Run{}, fmt.Errorf("read workflow run %s: %w", run, err)
	}
	v := state.Val()
	entries := lr.Val()
	if id != "" {
		for i, e := range entries {
			if strings.Contains(e, `"messageId":"`+id+`"`) {
				entries = entries[:i+1]
				break
			}
		}
	}
	if entries == nil {
		entries = []string{}
	}
	return runOf(v[0], v[1], entries), nil
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
