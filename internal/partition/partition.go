// Package partition spreads retryd's data over Redis Cluster. A request
// belongs to one of P partitions; each partition has its own hash tag (so
// one request's keys and its asynq task share one slot) and its own asynq
// queue (named like the tag). The request id tells its partition, and an
// Idempotency-Key picks one by hash, so duplicates meet in one slot.
//
// With P = 1 the single tag is "retryd" and ids are as before partitions
// existed: an existing deployment upgrades in place. P is fixed for a
// deployment's life: ids made under one P are not routed right under
// another.
package partition

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/retryd/retryd/internal/ids"
)

// Max is the largest number of partitions (an id's last character, one of
// 32, names its partition).
const Max = 32

// Slots is the number of Redis Cluster hash slots.
const Slots = 16384

// Set is the partitions of a deployment.
type Set struct {
	tags []string
}

// New returns the set of p partitions (1 ≤ p ≤ Max).
func New(p int) (Set, error) {
	if p < 1 || p > Max {
		return Set{}, fmt.Errorf("partitions must be between 1 and %d, got %d", Max, p)
	}
	if p == 1 {
		return Set{tags: []string{"retryd"}}, nil
	}
	tags := make([]string, p)
	for i := range tags {
		tags[i] = tagNear(i, p)
	}
	return Set{tags: tags}, nil
}

// One is the single-partition set (PARTITIONS=1).
func One() Set { s, _ := New(1); return s }

// tagNear finds the tag of partition i of p: the first "retryd-i-n" whose
// slot is nearest (i + ½)·Slots/p among a fixed number of candidates, so
// partitions spread evenly over masters that hold equal slot ranges, and
// every process computes the same tags.
func tagNear(i, p int) string {
	target := (2*i + 1) * Slots / (2 * p)
	best, bestDist := "", Slots
	for n := 0; n < 4096; n++ {
		tag := "retryd-" + strconv.Itoa(i) + "-" + strconv.Itoa(n)
		d := Slot(tag) - target
		if d < 0 {
			d = -d
		}
		if d < bestDist {
			best, bestDist = tag, d
		}
		if d <= Slots/(16*p) {
			break
		}
	}
	return best
}

// Len is the number of partitions.
func (s Set) Len() int { return len(s.tags) }

// Tag is partition i's hash tag (without braces); it is also the name of
// its asynq queue.
func (s Set) Tag(i int) string { return s.tags[i] }

// Tags are all the tags, partition 0 first.
func (s Set) Tags() []string { return append([]string(nil), s.tags...) }

// OfID is the partition of request (or schedule) id.
func (s Set) OfID(id string) int {
	if len(s.tags) <= 1 || len(id) != ids.Len {
		return 0
	}
	return ids.Index(id[ids.Len-1]) % len(s.tags)
}

// OfKey is the partition an Idempotency-Key picks.
func (s Set) OfKey(key string) int {
	if len(s.tags) <= 1 {
		return 0
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum32() % uint32(len(s.tags)))
}

// NewID returns a new id at now in the partition idemKey picks, or in a
// random one without a key.
func (s Set) NewID(now time.Time, idemKey string) string {
	id := ids.New(now)
	if len(s.tags) <= 1 {
		return id
	}
	p := rand.IntN(len(s.tags))
	if idemKey != "" {
		p = s.OfKey(idemKey)
	}
	return id[:ids.Len-1] + ids.Char(p)
}

// NewIDIn returns a new id at now in partition p (a request made from
// another, in its partition, so one script can write both).
func (s Set) NewIDIn(now time.Time, p int) string {
	id := ids.New(now)
	if len(s.tags) <= 1 {
		return id
	}
	return id[:ids.Len-1] + ids.Char(p%len(s.tags))
}

// Slot is the Redis Cluster slot of a hash tag: CRC16 (XMODEM) mod 16384.
func Slot(tag string) int {
	var crc uint16
	for i := 0; i < len(tag); i++ {
		crc ^= uint16(tag[i]) << 8
		for b := 0; b < 8; b++ {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % Slots
}
