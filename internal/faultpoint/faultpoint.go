// Package faultpoint lets crash tests kill a retryd process at a named point
// of its work. Points are inert unless the process was started with
// RETRYD_FAULTPOINT naming one: production never sets it, and an unset
// Points costs one string comparison per point.
package faultpoint

import (
	"os"
	"sync"
	"syscall"
)

// EnvVar names the fault point a process should die at.
const EnvVar = "RETRYD_FAULTPOINT"

// The named points in the attempt path.
const (
	// BeforeCall: the attempt is marked in flight, the HTTP call not made.
	BeforeCall = "before-call"
	// AfterCall: the destination answered; retryd has not recorded it.
	AfterCall = "after-call"
	// AfterRecord: the outcome is recorded; asynq has not been told.
	AfterRecord = "after-record"
	// MidRedrive: the record is redriven; its task is not requeued yet.
	MidRedrive = "mid-redrive"
	// AfterPublicationClaim: a topic publish claimed its Idempotency-Key
	// and made none of its requests yet.
	AfterPublicationClaim = "after-publication-claim"
)

// Points kills the process at one armed point, once.
type Points struct {
	armed string
	once  sync.Once
}

// FromEnv arms the point named by RETRYD_FAULTPOINT, if any.
func FromEnv(getenv func(string) string) *Points { return &Points{armed: getenv(EnvVar)} }

// Hit kills the process (SIGKILL, no cleanup, as a crash) when name is the
// armed point. A nil *Points is inert.
func (p *Points) Hit(name string) {
	if p == nil || p.armed == "" || p.armed != name {
		return
	}
	p.once.Do(func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // SIGKILL is not instantaneous; never go on past the point
	})
}
