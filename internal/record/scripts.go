package record

import (
	"embed"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/luascript"
)

// scripts holds one Lua script per operation. Each file starts with what
// it does, then its KEYS, ARGV and return values, one per line; its Go
// wrapper is the Store method of the same operation. Every key a script
// touches is passed in KEYS, so each script runs within one cluster slot.
//
//go:embed scripts/*.lua
var scripts embed.FS

// script loads scripts/<name>.lua.
func script(name string) *redis.Script { return luascript.Load(scripts, "", name) }
