// Package ids makes request ids: opaque to clients, but sortable by creation
// time as plain strings, so Redis can list "newest first" by lexical order.
package ids

import (
	"math/rand/v2"
	"sync"
	"time"
)

// alphabet is Crockford's base32 in lower case; its characters are in ASCII
// order, so lexical order of ids equals numeric order of their timestamps.
const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// Len is the length of every id.
const Len = 20

// New returns a 20-character id: 10 characters of Unix milliseconds followed by
// 10 characters (50 bits) of randomness. Ids a process makes within one
// millisecond count up from the first one's random part, so that their order
// is the order they were made in: a key's requests made in one millisecond
// keep their order in its lines, whose places are their ids' times.
func New(now time.Time) string {
	ms := uint64(now.UnixMilli())
	last.mu.Lock()
	var x uint64
	switch {
	case ms == last.ms && last.x+step < 1<<50:
		x = last.x + step
	case ms < last.ms:
		// Made at a time before the newest id's (its caller read the
		// clock, then waited for the lock): unordered within its
		// millisecond, which has passed.
		x = rand.Uint64() & (1<<49 - 1)
		last.mu.Unlock()
		return format(now, x)
	default:
		// Ids need to be unique, not secret: math/rand/v2's ChaCha8
		// source (per thread, no system call) gives 50 bits per
		// millisecond. The top bit is left clear so that counting up
		// within a millisecond hardly ever runs out.
		x = rand.Uint64() & (1<<49 - 1)
	}
	last.ms, last.x = ms, x
	last.mu.Unlock()
	return format(now, x)
}

// format is the id of time now and random part x.
func format(now time.Time, x uint64) string {
	var b [Len]byte
	copy(b[:10], Prefix(now))
	for i := Len - 1; i >= 10; i-- {
		b[i] = alphabet[x&31]
		x >>= 5
	}
	return string(b[:])
}

// step is how ids of one millisecond count up: by their next-to-last
// character, since a partition's id has its own last one (partition.Set).
const step = 32

// last is the newest id's time and random part: a process's ids made in
// its newest millisecond count up from it.
var last struct {
	mu sync.Mutex
	ms uint64
	x  uint64
}

// Prefix is the time part of the ids made at t: every id made before t
// sorts before it, every id made at t or later after it.
func Prefix(t time.Time) string {
	var b [10]byte
	ms := uint64(t.UnixMilli())
	for i := 9; i >= 0; i-- {
		b[i] = alphabet[ms&31]
		ms >>= 5
	}
	return string(b[:])
}

// Time is when id was made (to the millisecond); false when id is not
// one.
func Time(id string) (time.Time, bool) {
	if !Valid(id) {
		return time.Time{}, false
	}
	var ms int64
	for i := 0; i < 10; i++ {
		ms = ms<<5 | int64(Index(id[i]))
	}
	return time.UnixMilli(ms), true
}

// Valid reports whether s has the shape of an id. It keeps arbitrary strings
// out of Redis key names.
func Valid(s string) bool {
	if len(s) != Len {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z') || c == 'i' || c == 'l' || c == 'o' || c == 'u' {
			return false
		}
	}
	return true
}

// Index is the value (0–31) of an id character.
func Index(c byte) int {
	for i := 0; i < len(alphabet); i++ {
		if alphabet[i] == c {
			return i
		}
	}
	return 0
}

// Char is the id character of value i (0–31).
func Char(i int) string { return alphabet[i&31 : i&31+1] }
