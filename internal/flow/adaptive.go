package flow

// Adaptive backpressure: AIMD on the effective rate of a key whose
// attempts answer 429 or 503 or time out (this worker's own view).

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Adaptive tuning, which needs no setting.
const (
	// CutFactor multiplies a key's effective rate on overload.
	CutFactor = 0.5
	// MinOverloads is how many overloaded answers a key must get within
	// two seconds on a worker before its first cut.
	MinOverloads = 25
	// CutShare is the share of a key's answers (of the last one to two
	// seconds) that must be overloaded for a cut; below it, successes
	// raise the rate again. A destination that sheds some load (30 % of
	// 503s) keeps its rate; one that mostly refuses is eased off.
	CutShare = 0.5
	// ShedShare is the share of overloaded answers a destination may shed
	// at random and keep its rate; CutConfidence is how many standard
	// deviations above it a key's overloaded answers must be for a cut.
	// Without it, a key cut once was cut again on a majority of 3 to 6
	// answers, which 30 % of random 503s gives every few seconds: a
	// destination cut by chance stayed at the floor.
	ShedShare     = 0.3
	CutConfidence = 4.0
	// RecoverShare is the additive increase: a tenth of the rate before
	// the first cut, per second of successes (at least 1/s).
	RecoverShare = 0.1
)

// key is one flow-control key's state on this worker.
type key struct {
	spec     Request // the last request seen: its configured limits
	inflight int
	parked   int // parks since the last snapshot
	lim      *rate.Limiter
	base     float64 // the rate (per second) before the first cut
	lastCut  time.Time
	// starts in the current and the previous second, for the observed
	// rate a first cut starts from.
	startSec         int64
	starts, prevSecs int
	// outcomes of the current second (sec) and the one before: the share
	// of overloaded answers decides cuts and increases
	sec                  int64
	secOK, secOver       int
	lastSecOK, lastSecOv int
	// outcomes since the last cut: at a cut rate of a few per second, the
	// last seconds hold too few answers to tell overload from chance
	cutOK, cutOver int
	// recent outcomes, for the failure and overload shares
	ok, overloaded, failed       int
	windowStart                  time.Time
	prevOK, prevOver, prevFailed int
	lastUsed                     time.Time
	// lineSeen is when this worker last saw the key's cut line non-empty
	// (zero: empty, as far as it knows).
	lineSeen time.Time
	// headAt is the place of the line's first waiter when last looked at
	// (zero: unknown), and pumped when that was.
	headAt, pumped time.Time
	// listed is when this worker last listed the line in
	// keys.Lines.
	listed time.Time
	// turns is held from reserving turns of lim until those not given
	// are canceled: a reservation canceled after a later one was made
	// gives nothing back, and the rate would leak turns.
	turns sync.Mutex
}

// keyOf returns key state, remembering req's limits. core.mu is held.
func (cg *cutGate) keyOf(req Request, now time.Time) *key {
	k := cg.keys[req.Key]
	if k == nil {
		k = &key{windowStart: now}
		cg.keys[req.Key] = k
	}
	k.spec, k.lastUsed = req, now
	return k
}

// countStart counts an attempt start for the observed rate. core.mu is held.
func (k *key) countStart(now time.Time) {
	sec := now.Unix()
	switch {
	case sec == k.startSec:
	case sec == k.startSec+1:
		k.prevSecs, k.starts = k.starts, 0
	default:
		k.prevSecs, k.starts = 0, 0
	}
	k.startSec = sec
	k.starts++
}

// observedRate is the key's recent starts per second on this worker.
func (k *key) observedRate(now time.Time) float64 {
	if now.Unix() > k.startSec+1 {
		return 0
	}
	if now.Unix() == k.startSec+1 {
		return float64(k.starts)
	}
	return float64(max(k.starts, k.prevSecs))
}

// learn is AIMD on the key's effective rate. core.mu is held.
func (k *key) learn(c *core, o Outcome, now time.Time) {
	if now.Sub(k.windowStart) >= c.tune.AdaptiveWindow {
		k.prevOK, k.prevOver, k.prevFailed, k.ok, k.overloaded, k.failed, k.windowStart = k.ok, k.overloaded, k.failed, 0, 0, 0, now
	}
	switch sec := now.Unix(); {
	case sec == k.sec:
	case sec == k.sec+1:
		k.lastSecOK, k.lastSecOv, k.secOK, k.secOver, k.sec = k.secOK, k.secOver, 0, 0, sec
	default:
		k.lastSecOK, k.lastSecOv, k.secOK, k.secOver, k.sec = 0, 0, 0, 0, sec
	}
	switch o {
	case Succeeded:
		k.ok++
		k.secOK++
		k.cutOK++
	case Overloaded:
		k.overloaded++
		k.secOver++
		k.cutOver++
	default:
		k.failed++ // counted for GET /flows; it says nothing of load
		return
	}
	over, all := k.secOver+k.lastSecOv, k.secOK+k.secOver+k.lastSecOK+k.lastSecOv
	overloaded := float64(over) >= CutShare*float64(all)
	// A cut key: also what it answered since its last cut.
	cutIt := clearlyOverloaded(over, all) || (k.lim != nil && clearlyOverloaded(k.cutOver, k.cutOK+k.cutOver))
	switch {
	case o == Succeeded && k.lim != nil && !overloaded:
		// Additive increase, while most answers are good.
		cur := float64(k.lim.Limit())
		next := cur + max(1, k.base*RecoverShare)/max(cur, 1)
		if next >= k.base {
			k.lim = nil // recovered: no limit again
			return
		}
		k.lim.SetLimitAt(now, rate.Limit(next))
	case o == Overloaded && c.cfg.Adaptive && cutIt && now.Sub(k.lastCut) >= c.tune.CutEvery:
		// Only a key under load is cut first: a few requests failing (and
		// retrying on their own backoff) are not a destination to ease
		// off, and their retries must keep their timing.
		if k.lim == nil && over < MinOverloads {
			return
		}
		cur := k.observedRate(now)
		if k.lim != nil {
			cur = float64(k.lim.Limit())
		} else {
			k.base = max(cur, c.cfg.MinRate*2)
		}
		next := max(c.cfg.MinRate, cur*CutFactor)
		if k.lim != nil && next >= cur {
			return // at the floor already
		}
		c.log.Info("adaptive backpressure cut a key's rate", "key", k.spec.Key, "from", cur, "to", next,
			"overloaded", over, "answers", all, "overloadedSinceCut", k.cutOver, "answersSinceCut", k.cutOK+k.cutOver)
		k.lastCut, k.cutOK, k.cutOver = now, 0, 0
		k.cutTo(now, next, c.tune.RateHorizon)
	}
}

// clearlyOverloaded says whether over overloaded answers of all are a
// majority (CutShare) and more than a destination shedding ShedShare at
// random gives, by CutConfidence standard deviations: 100 % of 7 answers,
// 9 of 10, 15 of 20, 28 of 50.
func clearlyOverloaded(over, all int) bool {
	n := float64(all)
	return float64(over) >= CutShare*n && float64(over)-ShedShare*n >= CutConfidence*math.Sqrt(n*ShedShare*(1-ShedShare))
}

// cutTo gives the key a new, lower rate. Turns already given (up to
// RateHorizon ahead) stay given, and the new rate's turns follow them.
// Lowering the old limiter's rate instead would stretch its debt of turns
// given: from 5 s of turns at 16/s to 80 s at 1/s. core.mu is held.
func (k *key) cutTo(now time.Time, perSecond float64, horizon time.Duration) {
	ahead := 0.0 // seconds of turns given
	if k.lim != nil {
		if tokens := k.lim.TokensAt(now); tokens < 0 {
			ahead = min(-tokens/float64(k.lim.Limit()), horizon.Seconds())
		}
	}
	k.lim = rate.NewLimiter(rate.Limit(perSecond), 1)
	// The attempt that was just overloaded used the first turn.
	for n := int(math.Ceil(ahead * perSecond)); n >= 0; n-- {
		k.lim.ReserveN(now, 1)
	}
}
