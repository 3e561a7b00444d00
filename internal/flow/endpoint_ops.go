package flow

// The endpoint's moves that are not the gate's: an operator's open and
// close, the wake of a closed endpoint's line, a canceled waiter's leave.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/flow/flowdb"
	"github.com/retryd/retryd/internal/tenant"
)

// wakeEndpointLine wakes the waiters of closed endpoint name, in line
// order, until its line is empty or it opened again. Those with
// parallelism first get back their places in their keys' lines (ttl: the
// lines' time to live), so that their slots go in arrival order however
// the woken race to them.
func wakeEndpointLine(ctx context.Context, db *flowdb.DB, mover Mover, log *slog.Logger, name string, ttl time.Duration) error {
	for {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		taken, err := db.Endpoint.Take(tctx, name, resumeBatch)
		if err == nil {
			err = db.Par.KeepPlaces(tctx, taken, ttl)
		}
		cancel()
		if err != nil {
			return fmt.Errorf("take the waiters of %s: %w", name, err)
		}
		moves := make([]Move, 0, len(taken))
		for _, w := range taken {
			moves = append(moves, Now(w.ID))
		}
		// A waiter Redis could not wake has its safety net.
		move(ctx, mover, log, moves...)
		if len(taken) < resumeBatch {
			return nil
		}
	}
}

// EndpointCanceled takes canceled request id out of its endpoint's line
// (endpoint of tenant t); when it was the waiter to be woken for the next
// probe, the next waiter is, in its place.
func EndpointCanceled(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, t, endpoint, id string) error {
	if endpoint == "" {
		return nil
	}
	next, at, ok, err := flowdb.New(rdb).Endpoint.Cancel(ctx, EndpointName(t, endpoint), id)
	if err != nil {
		return fmt.Errorf("take %s out of its endpoint's line: %w", id, err)
	}
	if !ok {
		return nil
	}
	if a := move(ctx, mover, log, At(next, at)); a.err != nil {
		return fmt.Errorf("wake %s for the next probe: %w", next, a.err)
	}
	return nil
}

// EndpointChange is a change of an endpoint's state the breaker made.
type EndpointChange struct {
	Tenant, Endpoint string // whose, and scheme://host:port
	Open             bool   // opened; else closed
	// FailureRatio and Attempts are the window's that opened it.
	FailureRatio float64
	Attempts     int
}

// changed tells Config.OnEndpoint of a change of endpoint name.
func (eg *endpointGate) changed(name string, open bool, ratio float64, attempts int) {
	if eg.cfg.OnEndpoint == nil {
		return
	}
	t, endpoint := tenant.Split(name)
	eg.cfg.OnEndpoint(EndpointChange{Tenant: t, Endpoint: endpoint, Open: open, FailureRatio: ratio, Attempts: attempts})
}

// OpenEndpoint opens endpoint name (tenant-qualified scheme://host:port)
// unless it is open already: the breaker's decision (by "breaker"), or an
// operator's ("operator"). opened says it did.
func OpenEndpoint(ctx context.Context, rdb redis.UniversalClient, name string, ratio float64, by string, now time.Time, tune Tuning) (bool, error) {
	return openEndpoint(ctx, flowdb.New(rdb), name, ratio, by, now, tune)
}

// openEndpoint is OpenEndpoint on db.
func openEndpoint(ctx context.Context, db *flowdb.DB, name string, ratio float64, by string, now time.Time, tune Tuning) (bool, error) {
	tune = tune.withDefaults()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	// Listed even when it was open already: a list that failed is
	// mended.
	return db.Endpoint.Open(ctx, name, now, tune.BreakerProbe, ratio, tune.KeyTTL, by)
}

// ErrEndpointLimit: the tenant has opened its limit of endpoints by hand
// (ENDPOINT_LIMIT); nothing was opened.
var ErrEndpointLimit = errors.New("endpoint limit reached")

// handOpenedKeep is how long an endpoint listed as opened by hand stays
// listed before a full list looks at whether it is still open: an open
// in progress has listed it and not opened it yet.
const handOpenedKeep = time.Minute

// HandOpenEndpoint opens endpoint name (tenant-qualified) as an operator
// of its tenant, who may have at most limit endpoints opened by hand (0:
// no limit; ErrEndpointLimit past it). opened says it was not open.
func HandOpenEndpoint(ctx context.Context, rdb redis.UniversalClient, name string, limit int, now time.Time, tune Tuning) (bool, error) {
	db := flowdb.New(rdb)
	owner, _ := tenant.Split(name)
	list := func() (bool, error) { return db.Endpoint.ListHandOpened(ctx, name, limit, now) }
	listed, err := list()
	if err == nil && !listed {
		// Full: an endpoint closed since (its state expired unused) no
		// longer counts.
		if err = db.Endpoint.PruneHandOpened(ctx, owner, now, handOpenedKeep); err == nil {
			listed, err = list()
		}
	}
	if err != nil {
		return false, err
	}
	if !listed {
		return false, fmt.Errorf("%w: %d endpoints opened by hand", ErrEndpointLimit, limit)
	}
	return openEndpoint(ctx, db, name, 0, "operator", now, tune)
}

// CloseEndpoint closes endpoint name (an operator's decision) and wakes
// its waiters in line order. closed says it was not closed before.
func CloseEndpoint(ctx context.Context, rdb redis.UniversalClient, mover Mover, log *slog.Logger, name string, now time.Time, tune Tuning) (bool, error) {
	tune = tune.withDefaults()
	db := flowdb.New(rdb)
	closed, err := db.Endpoint.Close(ctx, name, now, tune.KeyTTL)
	if err != nil {
		return closed, err
	}
	return closed, wakeEndpointLine(ctx, db, mover, log, name, tune.KeyTTL)
}
