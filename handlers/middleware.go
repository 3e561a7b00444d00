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
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-redis/redis_rate/v10"
	"github.com/retryd/retryd/internal/record"
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

// RateLimit allows rps requests per second per tenant (per client IP when
// no keys are configured), counted in Redis so the limit holds across API
// replicas. Over it: 429 with Retry-After. If Redis cannot be asked, the
// request goes through (the handler itself will then answer 503 if it needs
// Redis): the limiter must not turn a Redis blip into a second outage.
func RateLimit(limiter *redis_rate.Limiter, rps int, log *slog.Logger) gin.HandlerFunc {
	limit := redis_rate.PerSecond(rps)
	return func(c *gin.Context) {
		if rps <= 0 {
			return
		}
		ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
		defer cancel()
		res, err := limiter.Allow(ctx, record.RateLimitKey(owner(c)), limit)
		if err != nil {
			log.Warn("rate limiter unavailable; request let through", "err", err)
			return
		}
		if res.Allowed > 0 {
			return
		}
		c.Header("Retry-After", strconv.Itoa(int(math.Ceil(max(res.RetryAfter.Seconds(), 1)))))
		Abort(c, log, Errorf(CodeRateLimited, "", "rate limit of "+strconv.Itoa(rps)+" requests per second exceeded"))
	}
}
