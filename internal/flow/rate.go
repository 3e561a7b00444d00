package flow

// The flowControl rate: turns spaced evenly (GCRA's virtual time) in
// Redis, one given to each waiter once.

import (
	"context"
	"time"

	"github.com/retryd/retryd/internal/keys"
)

// rateGate is the rate gate: its turns live in Redis alone.
type rateGate struct{ *core }

// Turn spacing: turns are spaced three percent wider than the rate asks
// (the destination sees starts a little after they are granted, unevenly,
// and must never count more than Rate in a period), and a turn may be
// taken up to that margin late without bunching starts past the rate.
const turnMargin = 3 // percent of the period

// enter runs the rate gate: it passes a request with no rate, or at its
// turn; a request whose turn is later sleeps until it (the timer starts
// it) without taking part in the gates after it meanwhile (a backlog
// behind a rate would otherwise churn through the fairness line).
func (rg *rateGate) enter(ctx context.Context, t *Ticket) error {
	if t.req.Rate <= 0 {
		return nil
	}
	until, ok, err := rg.turn(ctx, t.req, t.start)
	if err != nil {
		return err
	}
	if !ok && until.Sub(t.start) <= rg.tune.ShortWait {
		// Its own turn, moments away (the timer hands tasks over a little
		// early): waiting it out costs less than a park.
		if err := rg.sleep(ctx, until.Sub(t.start)); err != nil {
			return err
		}
		ok, t.start = true, rg.now()
		t.laterTurn(until)
	}
	if !ok {
		t.moves = append(t.moves, At(t.req.ID, until))
		return &Parked{Until: until, Reason: keys.WaitingRate, Starts: until}
	}
	return nil
}

// turn gives req its rate turn: ok when it may start now, else until when
// its task sleeps (its own turn, kept for it).
func (rg *rateGate) turn(ctx context.Context, req Request, now time.Time) (time.Time, bool, error) {
	period := req.Period
	if period <= 0 {
		period = time.Second
	}
	interval := (period + period*turnMargin/100) / time.Duration(req.Rate)
	grace := period * turnMargin / 100
	return rg.db.Rate.Turn(ctx, req.Key, req.ID, now, interval, grace, rg.tune.KeyTTL)
}
