package handlers

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"
	"github.com/retryd/retryd/internal/record"
	"github.com/retryd/retryd/internal/selection"
)

// devListener marks a request that came in on the QStash dev listener.
type devListener struct{}

// OnDevListener marks every request of h as one that came in on the QStash
// dev listener of -dev, where the SDK's public dev token is a key.
func OnDevListener(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), devListener{}, true)))
	})
}

// Auth requires one of keys as "Authorization: Bearer <key>", or as the
// password of basic auth (so a browser can log in to the dashboard); on the
// QStash dev listener (OnDevListener) devKeys are keys too, and only there:
// the SDK's dev token is public. With no keys configured it lets
// everything through. It decides on the headers alone, before anything
// reads the body, and a refusal closes the connection, so a client without
// a key cannot hold the API waiting for a body. Failures are counted per
// client address in failures (nil: not counted): past AuthFailureLimit a
// minute, a request without a valid key gets 429 instead of 401, so keys
// cannot be guessed at speed; a valid key keeps working. The dashboard's
// Basic challenge to a request without credentials is never throttled.
func Auth(keys, devKeys []Key, failures AuthFailures, log *slog.Logger) gin.HandlerFunc {
	digests := make([][32]byte, len(keys))
	for i, k := range keys {
		digests[i] = sha256.Sum256([]byte(k.Secret))
	}
	devDigests := append([][32]byte{}, digests...)
	devOwners := append([]Key{}, keys...)
	for _, k := range devKeys {
		devDigests = append(devDigests, sha256.Sum256([]byte(k.Secret)))
		devOwners = append(devOwners, k)
	}
	return func(c *gin.Context) {
		if len(digests) == 0 {
			return
		}
		digests, owners := digests, keys
		if c.Request.Context().Value(devListener{}) != nil {
			digests, owners = devDigests, devOwners
		}
		presented, ok := credential(c.Request)
		if ok {
			// Comparing fixed-size digests in constant time, and every key
			// every time, leaks neither a key's bytes nor its length nor
			// which key matched.
			d := sha256.Sum256([]byte(presented))
			match, which := 0, 0
			for i := range digests {
				eq := subtle.ConstantTimeCompare(d[:], digests[i][:])
				match |= eq
				which = subtle.ConstantTimeSelect(eq, i, which)
			}
			if match == 1 {
				k := owners[which]
				k.Secret = ""
				c.Set(callerCtx, k)
				return
			}
		}
		dashboard := strings.HasPrefix(c.Request.URL.Path, "/monitoring")
		if dashboard {
			c.Header("WWW-Authenticate", `Basic realm="retryd", charset="UTF-8"`)
		} else {
			c.Header("WWW-Authenticate", `Bearer realm="retryd"`)
		}
		msg := "missing API key: send Authorization: Bearer <key>"
		if ok {
			msg = "wrong API key"
			if strings.Contains(presented, ":") {
				// API_KEYS lists tenant:key; a caller who sends the whole
				// entry sends the tenant as part of the key.
				msg += "; API_KEYS entries are tenant:key and only the part after the colon is the key: send Authorization: Bearer <key>"
			}
		}
		if dashboard && !ok {
			// A browser's first visit carries no credentials: it must get
			// the Basic challenge to show the login prompt. Throttling it
			// would lock out every operator behind a proxy whose address
			// someone else failed from; it guesses nothing, so it is not
			// counted either.
			c.Header("Connection", "close")
			Abort(c, log, Errorf(CodeUnauthorized, "", msg))
			return
		}
		authFailed(c, failures, log, Errorf(CodeUnauthorized, "", msg))
	}
}

func credential(r *http.Request) (string, bool) {
	if _, pass, ok := r.BasicAuth(); ok {
		return pass, true
	}
	h := r.Header.Get("Authorization")
	scheme, token, found := strings.Cut(h, " ")
	if !found || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// RateLimit allows rps tokens per second per tenant (per client IP when
// no keys are configured), counted in Redis so the limit holds across API
// replicas. A call takes one token, which pays for the first request it
// makes; every further request it makes takes one more, in the one place
// a request is made (Charge): a bulk resend or redrive of 500 pays 500, as
// 500 single calls do. A call that fans out (a publish to a topic or URL
// group, a batch) pays for all its requests with PayFor before it makes
// any. Over the limit: 429 with Retry-After. If Redis cannot be asked, the
// call goes through (the handler itself will then answer 503 if it needs
// Redis): the limiter must not turn a Redis blip into a second outage.
func RateLimit(limiter *redis_rate.Limiter, rps int, log *slog.Logger) gin.HandlerFunc {
	limit := redis_rate.PerSecond(rps)
	return func(c *gin.Context) {
		if rps <= 0 {
			return
		}
		key := record.RateLimitKey(owner(c))
		ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
		defer cancel()
		res, err := limiter.Allow(ctx, key, limit)
		if err != nil {
			log.Warn("rate limiter unavailable; request let through", "err", err)
			return
		}
		if res.Allowed > 0 {
			b := &budget{limiter: limiter, key: key, limit: limit, rps: rps, paid: 1, log: log}
			c.Request = c.Request.WithContext(context.WithValue(c.Request.Context(), budgetKey{}, b))
			return
		}
		retryAfter(c, res.RetryAfter)
		Abort(c, log, Errorf(CodeRateLimited, "", "rate limit of "+strconv.Itoa(rps)+" a second exceeded (RATE_LIMIT_RPS: each call counts one, "+
			"and a call that makes requests one per request)"))
	}
}

// budgetKey is where RateLimit leaves the call's budget in its context,
// so that the code making a request (which holds the context, not the
// gin call) pays for it.
type budgetKey struct{}

// budget is what one call has paid of its caller's rate limit, and what
// it has used of that.
type budget struct {
	limiter *redis_rate.Limiter
	key     string
	limit   redis_rate.Limit
	rps     int
	mu      sync.Mutex
	paid    int // tokens taken so far: the call's own, and any taken since
	used    int // requests made (or about to be) against them
	log     *slog.Logger
}

func budgetOf(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

// RateLimited is a request refused by the caller's rate limit: nothing of
// it was made, so a bulk call stops before it and goes on from it later.
type RateLimited struct {
	Message    string
	RetryAfter time.Duration
}

func (e *RateLimited) Error() string { return e.Message }

// Is makes a RateLimited stop a walk before its request
// (selection.ErrUntouched).
func (e *RateLimited) Is(target error) bool { return target == selection.ErrUntouched }

// Charge pays one token of the caller's rate limit for one request the
// call is about to make (create, resend or redrive): from what the call
// has paid and not used (its own token, or a PayFor), else a new token.
// It is the one place a request is charged, so every route that makes
// requests pays one per request made. Refused: a *RateLimited, and the
// request must not be made. Without a rate limit (or when Redis cannot be
// asked) every request passes.
func Charge(ctx context.Context) error {
	b := budgetOf(ctx)
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used < b.paid {
		b.used++
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	res, err := b.limiter.AllowN(ctx, b.key, b.limit, 1)
	if err != nil {
		b.log.Warn("rate limiter unavailable; request let through", "err", err)
		b.paid++
		b.used++
		return nil
	}
	if res.Allowed == 0 {
		return &RateLimited{RetryAfter: res.RetryAfter, Message: "the rate limit of " + strconv.Itoa(b.rps) +
			" a second (RATE_LIMIT_RPS) is spent: each request made counts one, and this one was not made"}
	}
	b.paid++
	b.used++
	return nil
}

// Unspend gives back the place Charge took for a request that was then
// not made (the store refused it, or it was an idempotent replay): the
// call keeps the token, and its next request uses it, so a bulk call pays
// only for the requests it makes.
func Unspend(ctx context.Context) {
	b := budgetOf(ctx)
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used > 0 {
		b.used--
	}
}

// PayFor makes sure the call has paid one token of the caller's rate limit
// for each of the n requests it is about to make (each then Charges from
// what it paid), taking what is missing in one step. It is called before
// anything is made, so a call the limit refuses makes nothing: the answer
// is 429 with Retry-After. A call that would make more requests than the
// limit allows in a second can never pass and is refused as well, saying
// so. Without a rate limit (or when Redis cannot be asked) every call
// passes.
func PayFor(c *gin.Context, n int) error {
	b := budgetOf(c.Request.Context())
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	missing := n - (b.paid - b.used)
	if missing <= 0 {
		return nil
	}
	if n > b.rps {
		retryAfter(c, time.Second)
		return Errorf(CodeRateLimited, "", "this call would create "+strconv.Itoa(n)+" requests, and the rate limit allows "+
			strconv.Itoa(b.rps)+" a second (RATE_LIMIT_RPS), each request created counting as one: send them in smaller calls")
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
	defer cancel()
	res, err := b.limiter.AllowN(ctx, b.key, b.limit, missing)
	if err != nil {
		b.log.Warn("rate limiter unavailable; requests let through", "err", err)
		b.paid += missing
		return nil
	}
	if res.Allowed == 0 {
		retryAfter(c, res.RetryAfter)
		return Errorf(CodeRateLimited, "", "this call would create "+strconv.Itoa(n)+" requests, more than is left of the rate limit of "+
			strconv.Itoa(b.rps)+" a second (RATE_LIMIT_RPS), each request created counting as one; nothing was created")
	}
	b.paid += missing
	return nil
}

// retryAfter sets Retry-After to d in whole seconds, at least 1.
func retryAfter(c *gin.Context, d time.Duration) {
	c.Header("Retry-After", retryAfterSeconds(d))
}

func retryAfterSeconds(d time.Duration) string {
	return strconv.Itoa(int(math.Ceil(max(d.Seconds(), 1))))
}
