package record

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/ids"
	rediskeys "github.com/retryd/retryd/internal/keys"
	"github.com/retryd/retryd/internal/redistest"
	"github.com/retryd/retryd/internal/tenant"
)

// BenchmarkFind stores BENCH_FIND_N requests (1,000,000 by default)
// straight into Redis, as the scripts leave them after delivery, first
// without the list filters' indexes and then with them, and reports
// Redis' used_memory per request before and after each index family;
// then it times the first page (50) of a filtered list per filter, and
// a page after a cursor deep in the list, BENCH_FIND_RUNS times each
// (200), as p50 and p99. It is a benchmark, not a timed test: run it
// with `make bench-find` (docs/benchmarks.md holds its figures).
func BenchmarkFind(b *testing.B) {
	n := envInt("BENCH_FIND_N", 1_000_000)
	runs := envInt("BENCH_FIND_RUNS", 200)
	srv := redistest.Start(b)
	rdb := srv.Client()
	s := NewStore(rdb, 7*24*time.Hour)
	ctx := context.Background()
	now := time.Now()
	rng := rand.New(rand.NewPCG(1, 2))

	reqs := make([]benchRequest, n)
	for i := range reqs {
		reqs[i] = newBenchRequest(rng, now, i, n)
	}
	slices.SortFunc(reqs, func(a, b benchRequest) int { return strings.Compare(a.r.ID, b.r.ID) })
	if err := rdb.SAdd(ctx, rediskeys.Tenants, "team-a").Err(); err != nil {
		b.Fatal(err)
	}
	base := usedMemory(b, rdb)
	write(b, rdb, reqs, func(pipe redis.Pipeliner, x benchRequest) { x.writeRecord(ctx, pipe) })
	records := usedMemory(b, rdb)
	fmt.Printf("FIND %d requests stored; Redis used_memory %.0f bytes a request without the filter indexes\n", n, float64(records-base)/float64(n))
	families := []struct {
		name string
		add  func(redis.Pipeliner, benchRequest)
	}{
		{"host", func(pipe redis.Pipeliner, x benchRequest) {
			pipe.ZAdd(ctx, x.tk().host(x.r.Host), redis.Z{Member: x.r.ID})
		}},
		{"label", func(pipe redis.Pipeliner, x benchRequest) {
			for _, l := range x.r.Labels() {
				pipe.ZAdd(ctx, x.tk().label(l), redis.Z{Member: x.r.ID})
			}
		}},
		{"failure class and status code", func(pipe redis.Pipeliner, x benchRequest) {
			class, code := failIndexes(x.r.FailureClass, x.r.LastStatusCode)
			if class != "" {
				pipe.ZAdd(ctx, x.tk().failClass(class), redis.Z{Member: x.r.ID})
			}
			if code != "" {
				pipe.ZAdd(ctx, x.tk().failCode(x.r.LastStatusCode), redis.Z{Member: x.r.ID})
			}
		}},
		{"finished", func(pipe redis.Pipeliner, x benchRequest) {
			if x.r.Status.Terminal() {
				class, code := failIndexes(x.r.FailureClass, x.r.LastStatusCode)
				pipe.ZAdd(ctx, x.tk().finished(), redis.Z{Score: float64(x.r.CompletedAt.UnixMilli()),
					Member: finishedMember(x.r.ID, x.r.Host, class, code, x.r.Labels())})
			}
		}},
	}
	before := records
	for _, fam := range families {
		write(b, rdb, reqs, fam.add)
		after := usedMemory(b, rdb)
		fmt.Printf("FIND index %-30s +%.1f bytes a request\n", fam.name, float64(after-before)/float64(n))
		before = after
	}
	fmt.Printf("FIND all filter indexes              +%.1f bytes a request (%.1f%% more than the records alone)\n",
		float64(before-records)/float64(n), 100*float64(before-records)/float64(records-base))

	pick := func() benchRequest { return reqs[rng.IntN(n)] }
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	cases := []struct {
		name  string
		scope tenant.Scope
		f     func() Filter
	}{
		{"none", tenant.All, func() Filter { return Filter{} }},
		{"status=failed", tenant.All, func() Filter { return Filter{Statuses: StatusesOf(Failed)} }},
		{"host (busy)", tenant.All, func() Filter { return Filter{Host: hotHost(rng)} }},
		{"host (quiet)", tenant.All, func() Filter { return Filter{Host: quietHost(rng)} }},
		{"host:port", tenant.All, func() Filter { return Filter{Host: hotHost(rng) + ":443"} }},
		{"failureClass=timeout", tenant.All, func() Filter { return Filter{FailureClass: "timeout"} }},
		{"statusCode=503", tenant.All, func() Filter { return Filter{StatusCode: 503} }},
		{"statusCode=201 (completed scan)", tenant.All, func() Filter { return Filter{StatusCode: 201} }},
		{"label", tenant.All, func() Filter { return Filter{Label: "label-" + strconv.Itoa(rng.IntN(5))} }},
		{"created, one hour", tenant.All, func() Filter {
			from := ago(time.Duration(rng.IntN(23)+1) * time.Hour)
			return Filter{CreatedFrom: from, CreatedTo: from.Add(time.Hour)}
		}},
		{"finished, last hour", tenant.All, func() Filter { return Filter{FinishedFrom: ago(time.Hour)} }},
		{"host + method=GET", tenant.All, func() Filter { return Filter{Host: pick().r.Host, Method: "GET"} }},
		{"host + urlContains", tenant.All, func() Filter { return Filter{Host: pick().r.Host, URLContains: "/v1/orders"} }},
		{"host + failureClass + created 6h", tenant.All, func() Filter {
			return Filter{Host: hotHost(rng), FailureClass: "server_error", CreatedFrom: ago(6 * time.Hour)}
		}},
		{"tenant + host", tenant.Only("team-a"), func() Filter { return Filter{Host: hotHost(rng)} }},
		{"sparse: busy host + DELETE + 404", tenant.All, func() Filter { return Filter{Host: hotHost(rng), Method: "DELETE", StatusCode: 404} }},
	}
	b.ResetTimer()
	fmt.Printf("FIND %-34s %9s %9s %9s %9s %7s\n", "filter (page of 50)", "p50 ms", "p99 ms", "deep p50", "deep p99", "found")
	for _, c := range cases {
		var first, deep []time.Duration
		found := 0
		for range runs {
			f := c.f()
			start := time.Now()
			page, err := s.Find(ctx, c.scope, f, "", 50, nil)
			if err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			found += len(page.Requests)
			first = append(first, time.Since(start))
			// A page after a cursor deep in the list: a random
			// request's place.
			x := pick()
			for f.finished() && !x.r.Status.Terminal() {
				x = pick()
			}
			cursor := f.CursorAt(x.r)
			start = time.Now()
			if _, err := s.Find(ctx, c.scope, f, cursor, 50, nil); err != nil {
				b.Fatalf("%s after %s: %v", c.name, cursor, err)
			}
			deep = append(deep, time.Since(start))
		}
		fmt.Printf("FIND %-34s %9.2f %9.2f %9.2f %9.2f %7.1f\n", c.name, pct(first, 50), pct(first, 99), pct(deep, 50), pct(deep, 99),
			float64(found)/float64(runs))
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// pct is the p-th percentile of ds, in milliseconds.
func pct(ds []time.Duration, p int) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*p/100)].Microseconds()) / 1000
}

func usedMemory(b *testing.B, rdb *redis.Client) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory in INFO memory")
	return 0
}

// write runs add for every request, 1,000 requests a round trip.
func write(b *testing.B, rdb *redis.Client, reqs []benchRequest, add func(redis.Pipeliner, benchRequest)) {
	b.Helper()
	ctx := context.Background()
	for start := 0; start < len(reqs); start += 1000 {
		pipe := rdb.Pipeline()
		for _, x := range reqs[start:min(start+1000, len(reqs))] {
			add(pipe, x)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// Destinations: half the requests go to 10 busy hosts, the rest spread
// over 990 quiet ones.
func hotHost(rng *rand.Rand) string   { return "busy-" + strconv.Itoa(rng.IntN(10)) + ".example.com" }
func quietHost(rng *rand.Rand) string { return "quiet-" + strconv.Itoa(rng.IntN(990)) + ".example.net" }

type benchRequest struct{ r *Request }

func (x benchRequest) tk() tkeys { return keysOf("retryd").of(x.r.Tenant) }

// newBenchRequest is request i of n, made over the last day: mostly
// delivered, some failed, retrying, pending or canceled.
func newBenchRequest(rng *rand.Rand, now time.Time, i, n int) benchRequest {
	created := now.Add(-24 * time.Hour).Add(time.Duration(float64(24*time.Hour) * float64(i) / float64(n)))
	host := quietHost(rng)
	if rng.IntN(2) == 0 {
		host = hotHost(rng)
	}
	method := []string{"POST", "POST", "POST", "POST", "POST", "POST", "POST", "GET", "GET", "PUT", "DELETE"}[rng.IntN(11)]
	path := []string{"/v1/orders", "/v1/refunds", "/hooks/events", "/api/notify"}[rng.IntN(4)]
	r := &Request{ID: ids.New(created), URL: "https://" + host + path + "?n=" + strconv.Itoa(i), Host: host, Method: method,
		Headers: map[string]string{"Content-Type": "application/json"}, Body: `{"event":"order.paid","amount":1200,"currency":"EUR"}`,
		MaxRetries: 5, BackoffMs: 1000, MaxBackoffMs: 60000, TimeoutMs: 10000, CreatedAt: created, NextAttemptAt: created}
	if rng.IntN(10) == 0 {
		r.Tenant = "team-a"
	}
	if rng.IntN(10) == 0 {
		r.QStash = &QStash{Labels: []string{"label-" + strconv.Itoa(rng.IntN(5))}}
	}
	finished := created.Add(time.Duration(50+rng.IntN(500)) * time.Millisecond)
	switch p := rng.IntN(100); {
	case p < 85:
		r.Status, r.LastStatusCode, r.CompletedAt = Completed, []int{200, 200, 200, 201, 204}[rng.IntN(5)], finished
	case p < 93:
		r.Status, r.CompletedAt = Failed, finished
		switch r.LastStatusCode = []int{500, 503, 404, 0}[rng.IntN(4)]; r.LastStatusCode {
		case 0:
			r.FailureClass = "timeout"
		case 404:
			r.FailureClass = "client_error"
		default:
			r.FailureClass = "server_error"
		}
	case p < 96:
		r.Status, r.LastStatusCode, r.FailureClass = Retrying, 503, "server_error"
	case p < 98:
		r.Status = Pending
	default:
		r.Status, r.CompletedAt = Canceled, finished
	}
	return benchRequest{r: r}
}

// writeRecord queues what the scripts leave of x without the filter
// indexes: its hash, spec, attempts and status indexes.
func (x benchRequest) writeRecord(ctx context.Context, pipe redis.Pipeliner) {
	r := x.r
	k := keysOf("retryd")
	fields := r.fields()
	if r.LastStatusCode != 0 || r.FailureClass != "" {
		code := ""
		if r.LastStatusCode != 0 {
			code = strconv.Itoa(r.LastStatusCode)
		}
		// finish.lua empties the attempt's in-flight marks.
		fields = append(fields, fAttemptCount, 1, fBudgetUsed, 1, fLastStatusCode, code, fFailureClass, r.FailureClass, fLastError, "",
			fInflightN, "", fInflightAt, "")
		pipe.RPush(ctx, k.attempts(r.ID), fmt.Sprintf(`{"n":1,"startedAtMs":%d,"durationMs":42,"statusCode":%d,"outcome":"success"}`,
			r.CreatedAt.UnixMilli(), r.LastStatusCode))
	}
	if !r.CompletedAt.IsZero() {
		// The last of equal fields is the one HSET keeps: a finished
		// request's next attempt is emptied.
		fields = append(fields, fCompletedAt, ms(r.CompletedAt), fNextAttemptAt, "")
	}
	pipe.HSet(ctx, k.req(r.ID), fields...)
	pipe.Set(ctx, k.spec(r.ID), r.spec(), 0)
	pipe.ZAdd(ctx, x.tk().index(r.Status), redis.Z{Member: r.ID})
	if r.Status == Failed {
		pipe.ZAdd(ctx, x.tk().failedHost(r.Host), redis.Z{Member: r.ID})
	}
}
