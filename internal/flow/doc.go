// Package flow decides when an attempt may start, so that no destination
// can starve the others and a struggling one is eased off. It only
// decides: internal/waiting parks and wakes the tasks.
//
// Admit passes an attempt through its gates, in this order (the list
// gates in gates.go; TestPackageDocListsTheGates keeps the two alike):
//
//   - queue: the request's queue (all workers): a queue's messages start
//     in the order they were made, at most its parallelism at once
//     (queue.go);
//   - operator: an operator's settings on its key (all workers): a paused
//     key holds its requests (a destination's own key, host:port, holds
//     every request of its tenant to it), and a pin overrides their
//     parallelism or rate (control.go);
//   - endpoint: the breaker of the request's endpoint (scheme://host:port)
//     of its tenant (all workers): an endpoint whose attempts of the
//     window mostly failed for its own reasons opens; while open, one
//     waiting request per probe interval is sent as its probe and the
//     others wait in the endpoint's line until a probe succeeds and wakes
//     them in order. Outcomes are counted in the worker's memory, and a
//     worker reads the state of an endpoint it delivers to at most once a
//     second, so a closed endpoint costs about no Redis command per
//     attempt (endpoint.go);
//   - cut: adaptive backpressure (this worker): a key whose attempts
//     answer 429 or 503 or time out gets an effective rate, cut
//     multiplicatively on overload and raised additively as attempts
//     succeed (AIMD), and waits in the key's line for a turn of it
//     (cutline.go, adaptive.go). Every key is a tenant's: a request
//     without a flowControl.key has its destination's host:port as its
//     tenant names it (Request.scoped), so a tenant whose requests to a
//     host are refused cuts its own rate there and no other tenant's. A
//     destination overloaded by every tenant gets each tenant's key cut
//     on its own overloaded answers: each backs off, which eases the
//     destination all the same (its floor is then FLOW_ADAPTIVE_MIN_RATE
//     per tenant sending to it, per worker);
//   - rate: the request's flowControl rate (all workers): turns spaced
//     evenly (GCRA's virtual time) in Redis, one given to each waiter
//     once, so a waiter sleeps until its own turn and then starts (before
//     fairness, so a waiter for a later turn takes no part in it;
//     rate.go);
//   - fairness: destination and tenant fairness (this worker): one
//     destination (host:port) holds at most a share (half by default) of
//     the worker's slots; while another tenant is about (learnt from the
//     tenants stamped on requests), one tenant holds at most a share of
//     them and of a destination's; tenants take turns in a destination's
//     line (fairness.go, tenants.go). The destination's share and the
//     tenant's are one gate: their lanes are taken together, so that a
//     request never holds one lane's slot while it waits in another's
//     line;
//   - parallelism: the request's flowControl parallelism (all workers):
//     slots in Redis with leases, handed straight to the longest waiter
//     on release (parallelism.go).
//
// A gate that holds an attempt parks it: the gates it passed give back
// what they took, in reverse order, and its task goes back to asynq with a
// deadline, holding no worker slot, and nothing polls it. It is started
// when the slot it waits for frees; the deadline is only a safety net (a
// worker that died holding a slot, whose lease then ends). Waits on a
// rate are timed: it is started at its turn, to the millisecond. An
// attempt that ends (Ticket.Done) leaves its gates in reverse order too,
// each starting whoever waits for what it gives back.
//
// flow decides and moves no task itself. What it decides about waiting
// tasks is a Move (start request id now, or at a time), plain data; the
// gates and loops hand their moves to one function (move, moves.go), the
// only code in flow that reaches the owner of waiting (a Mover:
// internal/waiting's Owner). It sorts the owner's answers into started,
// gone and stalled, and logs the stalls; the gate that handed a slot to a
// waiter that is gone or stalled hands the slot on, since the slot is its
// state.
//
// Each gate is a type holding its own state in this worker's memory:
// queueGate (none: a queue's order is Redis'), operatorGate (the keys'
// Controls as last read), endpointGate (the endpoints' breakers),
// cutGate (the flow-control keys' cuts, counts and lines), rateGate
// (none: its turns are Redis'), fairGate (the lanes and the tenants about)
// and parGate (the parallelism lines known here). They share a core (the
// settings, Redis (flowdb), the clock, the owner of waiting, the lock over their state and the
// worker's lifetime). Controller holds the gates, runs Admit through them
// and keeps the loops that look after their lines (Rebalance, Publish).
//
// The gates decide; flowdb (internal/flow/flowdb) does their Redis I/O:
// the scripts, the key names, one call per operation with its reply read
// into Go values. No file of flow calls go-redis or runs a script
// (TestFlowTalksToRedisOnlyThroughFlowdb): the operator's functions that
// take a client (Pause, SetQueue, CloseEndpoint, ...) hand it to flowdb.
package flow
