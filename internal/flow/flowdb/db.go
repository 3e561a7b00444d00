// Package flowdb is flow's Redis I/O: the scripts, the key names and
// every read and write of the gates' state and lines. The gates above it
// (internal/flow) decide; this package only talks to Redis and reads its
// answers into Go values, as asynq keeps its own I/O in internal/rdb. A
// script's reply it does not know is an error, never a panic.
package flowdb

import (
	"embed"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/flow/lines"
	"github.com/retryd/retryd/internal/luascript"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is scripts/<name>.lua with the line's library (lines.Library)
// first, then the libraries libs.
func script(name string, libs ...string) *redis.Script {
	return luascript.Load(scriptFiles, lines.Library+"\n", append(libs, name)...)
}

// DB is flow's Redis, one part per gate (and the lines' registry and the
// published stats), so that no part grows into a type of everything.
type DB struct {
	Queue    QueueIO
	Control  ControlIO
	Endpoint EndpointIO
	Cut      CutIO
	Rate     RateIO
	Fair     FairIO
	Par      ParIO
	Lines    LineIO
	Stats    StatsIO
}

// New is flow's Redis I/O on rdb.
func New(rdb redis.UniversalClient) *DB {
	return &DB{Queue: QueueIO{rdb}, Control: ControlIO{rdb}, Endpoint: EndpointIO{rdb}, Cut: CutIO{rdb},
		Rate: RateIO{rdb}, Fair: FairIO{rdb}, Par: ParIO{rdb}, Lines: LineIO{rdb}, Stats: StatsIO{rdb}}
}
