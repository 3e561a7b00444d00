package timer

import (
	"embed"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/luascript"
)

// scriptFiles holds the timer's Lua, one script per operation, each
// starting with what it does, then its KEYS, ARGV and return values.
//
//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is scripts/<name>.lua.
func script(name string) *redis.Script { return luascript.Load(scriptFiles, "", name) }
