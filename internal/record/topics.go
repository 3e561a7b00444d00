package record

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/tenant"
)

// Topic is a named set of endpoints (QStash's URL group): a request
// published to it becomes one request per endpoint.
type Topic struct {
	Name      string
	Tenant    string
	Endpoints []Endpoint // in the order they were added
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Endpoint is one destination of a topic; Name is optional.
type Endpoint struct {
	Name string `json:"name,omitempty"`
	URL  string `json:"url"`
}

// Topic limits.
const (
	MaxTopicEndpoints = 100
	MaxTopics         = 1000 // per tenant
)

// ErrTopicFull: adding the endpoints would pass MaxTopicEndpoints or
// MaxTopics; nothing was added.
var ErrTopicFull = errors.New("topic limit reached")

// Topics live in partition 0, in their tenant's keys: they are few and
// small, and a publish reads one whole.

// topicScript adds or removes endpoints of a topic in one step
// (scripts/topic_endpoints.lua).
var topicScript = script("topic_endpoints")

func (s *Store) topicKeys(t, name string) (hash, index string) {
	tk := s.first().of(t)
	return tk.topic(name), tk.topics()
}

// AddEndpoints adds endpoints to tenant t's topic name, creating it; an
// endpoint already there (by URL) takes the new name. It returns
// ErrTopicFull past the limits.
func (s *Store) AddEndpoints(ctx context.Context, t, name string, eps []Endpoint, now time.Time) error {
	return s.changeTopic(ctx, t, name, "add", eps, now)
}

// RemoveEndpoints removes the endpoints of tenant t's topic name that
// match one of eps (by URL, or by name for one without a URL); a topic
// left empty is deleted. A topic t does not have is ErrNotFound.
func (s *Store) RemoveEndpoints(ctx context.Context, t, name string, eps []Endpoint, now time.Time) error {
	return s.changeTopic(ctx, t, name, "remove", eps, now)
}

func (s *Store) changeTopic(ctx context.Context, t, name, op string, eps []Endpoint, now time.Time) error {
	if err := s.register(ctx, t); err != nil {
		return err
	}
	hash, index := s.topicKeys(t, name)
	args := []any{op, now.UnixMilli(), MaxTopicEndpoints, MaxTopics, name}
	for _, e := range eps {
		args = append(args, e.URL, e.Name)
	}
	res, err := topicScript.Run(ctx, s.rdb, []string{hash, index}, args...).Result()
	if err != nil {
		return wrap(err)
	}
	switch v := res.(type) {
	case string:
		switch v {
		case "full":
			return fmt.Errorf("%w: a topic holds at most %d endpoints, a tenant at most %d topics", ErrTopicFull, MaxTopicEndpoints, MaxTopics)
		case "missing":
			return ErrNotFound
		}
		return errReply("topic", v)
	case int64:
		return nil
	}
	return errReply("topic", res)
}

// GetTopic returns tenant t's topic name, or ErrNotFound.
func (s *Store) GetTopic(ctx context.Context, t, name string) (*Topic, error) {
	hash, _ := s.topicKeys(t, name)
	h, err := s.rdb.HGetAll(ctx, hash).Result()
	if err != nil {
		return nil, wrap(err)
	}
	if len(h) == 0 {
		return nil, ErrNotFound
	}
	tp := &Topic{Name: name, Tenant: tenant.Of(t), CreatedAt: fromMs(h["createdAt"]), UpdatedAt: fromMs(h["updatedAt"])}
	type placed struct {
		seq int
		ep  Endpoint
	}
	var eps []placed
	for f, v := range h {
		url, ok := strings.CutPrefix(f, "e:")
		if !ok {
			continue
		}
		seq, epName, _ := strings.Cut(v, " ")
		n, _ := strconv.Atoi(seq)
		eps = append(eps, placed{n, Endpoint{Name: epName, URL: url}})
	}
	slices.SortFunc(eps, func(a, b placed) int { return a.seq - b.seq })
	for _, e := range eps {
		tp.Endpoints = append(tp.Endpoints, e.ep)
	}
	return tp, nil
}

// ListTopics returns every topic of scope, by tenant then name.
func (s *Store) ListTopics(ctx context.Context, scope tenant.Scope) ([]*Topic, error) {
	tenants, err := s.tenantsIn(ctx, scope)
	if err != nil {
		return nil, err
	}
	out := []*Topic{}
	for _, t := range tenants {
		_, index := s.topicKeys(t, "")
		names, err := s.rdb.ZRange(ctx, index, 0, -1).Result()
		if err != nil {
			return nil, wrap(err)
		}
		for _, name := range names {
			tp, err := s.GetTopic(ctx, t, name)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			out = append(out, tp)
		}
	}
	return out, nil
}

// DeleteTopic deletes tenant t's topic name; requests published to it
// stay. ErrNotFound when there is none.
func (s *Store) DeleteTopic(ctx context.Context, t, name string) error {
	hash, index := s.topicKeys(t, name)
	pipe := s.rdb.TxPipeline()
	del := pipe.Del(ctx, hash)
	pipe.ZRem(ctx, index, name)
	if _, err := pipe.Exec(ctx); err != nil {
		return wrap(err)
	}
	if del.Val() == 0 {
		return ErrNotFound
	}
	return nil
}

// Publication is one publish to a topic: the requests it made, one per
// endpoint.
type Publication struct {
	ID        string
	Tenant    string
	Topic     string
	CreatedAt time.Time
	Children  []Child
}

// Child is one request of a publication. Index is the endpoint's place in
// its topic when the request was made: a publication's children are
// listed in that order.
type Child struct {
	ID       string `json:"id"`
	Endpoint string `json:"endpoint,omitempty"` // the endpoint's name
	URL      string `json:"url"`
	Index    int    `json:"i,omitempty"`
}

// publicationTTL is how long a publication is kept: its children's
// retention, and a week for their delays and retries.
func (s *Store) publicationTTL() time.Duration { return s.retention + 7*24*time.Hour }

// childField is the publication hash's field of the child made for url:
// one field per endpoint, so publishes that resume one another (the same
// Idempotency-Key) add their children instead of overwriting them.
func childField(url string) string { return "c:" + hashHex(url) }

// SavePublication stores p, or adds p's children to the publication
// stored with p's id (a resumed publish).
func (s *Store) SavePublication(ctx context.Context, p *Publication) error {
	k := s.k(p.ID).publication(p.ID)
	pipe := s.rdb.TxPipeline()
	pipe.HSetNX(ctx, k, "createdAt", p.CreatedAt.UnixMilli())
	fields := []any{"topic", p.Topic}
	if t := tenant.Of(p.Tenant); t != tenant.Default {
		fields = append(fields, fTenant, t)
	}
	for _, ch := range p.Children {
		b, _ := json.Marshal(ch)
		fields = append(fields, childField(ch.URL), string(b))
	}
	pipe.HSet(ctx, k, fields...)
	pipe.PExpire(ctx, k, s.publicationTTL())
	_, err := pipe.Exec(ctx)
	return wrap(err)
}

// GetPublication returns publication id of scope, or ErrNotFound.
func (s *Store) GetPublication(ctx context.Context, scope tenant.Scope, id string) (*Publication, error) {
	h, err := s.rdb.HGetAll(ctx, s.k(id).publication(id)).Result()
	if err != nil {
		return nil, wrap(err)
	}
	if len(h) == 0 || !scope.Has(h[fTenant]) {
		return nil, ErrNotFound
	}
	p := &Publication{ID: id, Tenant: tenant.Of(h[fTenant]), Topic: h["topic"], CreatedAt: fromMs(h["createdAt"])}
	if old := h["children"]; old != "" { // a publication stored whole, before children had fields of their own
		if err := json.Unmarshal([]byte(old), &p.Children); err != nil {
			return nil, fmt.Errorf("publication %s: %w", id, err)
		}
		for i := range p.Children {
			p.Children[i].Index = i
		}
	}
	for f, v := range h {
		if !strings.HasPrefix(f, "c:") {
			continue
		}
		var ch Child
		if err := json.Unmarshal([]byte(v), &ch); err != nil {
			return nil, fmt.Errorf("publication %s: child %s: %w", id, f, err)
		}
		p.Children = append(p.Children, ch)
	}
	slices.SortStableFunc(p.Children, func(a, b Child) int {
		if a.Index != b.Index {
			return a.Index - b.Index
		}
		return strings.Compare(a.URL, b.URL)
	})
	return p, nil
}

// Claim is the publication an Idempotency-Key of a publish names.
type Claim struct {
	ID       string // the publication
	SameBody bool   // whether it was claimed by a publish of the same body
}

// ClaimPublication claims idemKey of tenant t for publication id, made
// from a publish of body hash bodyHash, for IdempotencyWindow. It returns
// nil when id now holds the key, or the publication that claimed it
// before: a publish with that key resumes it.
func (s *Store) ClaimPublication(ctx context.Context, t, idemKey, id, bodyHash string) (*Claim, error) {
	key := s.first().of(t).idem("publication\x00" + idemKey)
	ok, err := s.rdb.SetNX(ctx, key, id+" "+bodyHash, IdempotencyWindow).Result()
	if err != nil {
		return nil, wrap(err)
	}
	if ok {
		return nil, nil
	}
	prev, err := s.rdb.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		// Expired between the two calls: claim it again.
		return s.ClaimPublication(ctx, t, idemKey, id, bodyHash)
	}
	if err != nil {
		return nil, wrap(err)
	}
	prevID, prevHash, _ := cutSpace(prev)
	if prevID == "" {
		return nil, errReply("publication claim", prev)
	}
	// A claim of before body hashes were kept names no hash: it is taken
	// as the same body.
	return &Claim{ID: prevID, SameBody: prevHash == "" || prevHash == bodyHash}, nil
}

var releaseClaimScript = script("publication_release")

// ReleasePublication gives back idemKey's claim by publication id (a
// publish that made nothing), so a repeat tries again.
func (s *Store) ReleasePublication(ctx context.Context, t, idemKey, id string) error {
	key := s.first().of(t).idem("publication\x00" + idemKey)
	return wrap(releaseClaimScript.Run(ctx, s.rdb, []string{key}, id).Err())
}
