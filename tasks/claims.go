package tasks

import (
	"sync"
	"time"
)

// claims hands a value from the goroutine that made it to a later one, by
// key, once. A value nobody claims (asynq did not finish or run the task
// run it was made for) is dropped after claimsForgetAfter; old entries are
// swept only once the map is large, so the common put/take stays cheap.
type claims[V any] struct {
	mu sync.Mutex
	m  map[string]claim[V]
}

type claim[V any] struct {
	v  V
	at time.Time
}

const (
	claimsForgetAfter = 5 * time.Minute
	claimsSweepAt     = 1024
)

func (c *claims[V]) put(key string, v V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]claim[V]{}
	}
	if len(c.m) >= claimsSweepAt {
		for k, e := range c.m {
			if now.Sub(e.at) > claimsForgetAfter {
				delete(c.m, k)
			}
		}
	}
	c.m[key] = claim[V]{v, now}
}

// take returns the value put under key and forgets it.
func (c *claims[V]) take(key string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	delete(c.m, key)
	return e.v, ok
}

func (c *claims[V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
