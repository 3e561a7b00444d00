package credentials

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ExpiringWithin is how long before its notAfter a certificate is
// reported expiring.
const ExpiringWithin = 14 * 24 * time.Hour

// Trouble is a credential an operator must look at: its certificate
// expires soon (Expiring), or its token endpoint keeps failing (Failing).
type Trouble struct {
	Tenant, Name string
	Expiring     bool
	NotAfter     time.Time
	Failing      bool
	LastError    string
	version      string
}

// Troubles lists every tenant's credentials that expire within
// ExpiringWithin of now or keep failing.
func (s *Store) Troubles(ctx context.Context, now time.Time) ([]Trouble, error) {
	tenants, err := s.RDB.SMembers(ctx, tenantsKey).Result()
	if err != nil {
		return nil, fmt.Errorf("list tenants with credentials: %w", err)
	}
	var out []Trouble
	for _, t := range tenants {
		k := keysOf(t)
		creds, err := s.RDB.HGetAll(ctx, k.creds()).Result()
		if err != nil {
			return nil, fmt.Errorf("read credentials of %s: %w", t, err)
		}
		use, err := s.RDB.HGetAll(ctx, k.use()).Result()
		if err != nil {
			return nil, fmt.Errorf("read credentials of %s: %w", t, err)
		}
		for name, raw := range creds {
			st, err := decodeStored(raw)
			if err != nil {
				continue
			}
			tr := Trouble{Tenant: t, Name: name, version: st.Version}
			if c := st.View.Certificate; c != nil && c.NotAfter.Sub(now) < ExpiringWithin {
				tr.Expiring, tr.NotAfter = true, c.NotAfter
			}
			var u usage
			if json.Unmarshal([]byte(use[name]), &u) == nil && u.Failures >= failingAfter {
				tr.Failing, tr.LastError = true, u.LastError
			}
			if tr.Expiring || tr.Failing {
				out = append(out, tr)
			}
		}
	}
	return out, nil
}

// NewlyExpiring is Troubles' expiring certificates not reported before
// (by any worker): each is reported once per version of its credential.
func (s *Store) NewlyExpiring(ctx context.Context, now time.Time) ([]Trouble, error) {
	all, err := s.Troubles(ctx, now)
	if err != nil {
		return nil, err
	}
	var out []Trouble
	for _, tr := range all {
		if !tr.Expiring {
			continue
		}
		mark := string(keysOf(tr.Tenant)) + "expiring:" + tr.Name + ":" + tr.version
		first, err := s.RDB.SetNX(ctx, mark, "1", ExpiringWithin+24*time.Hour).Result()
		if err != nil {
			return out, fmt.Errorf("mark an expiring credential: %w", err)
		}
		if first {
			out = append(out, tr)
		}
	}
	return out, nil
}

// ExpiryCheck is how often a worker looks for expiring certificates.
const ExpiryCheck = time.Minute

// WatchExpiring reports each newly expiring certificate to report, now
// and every ExpiryCheck, until ctx ends.
func (s *Store) WatchExpiring(ctx context.Context, now func() time.Time, report func(Trouble), warn func(error)) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		found, err := s.NewlyExpiring(cctx, now())
		cancel()
		if err != nil && ctx.Err() == nil {
			warn(err)
		}
		for _, tr := range found {
			report(tr)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(ExpiryCheck):
		}
	}
}
