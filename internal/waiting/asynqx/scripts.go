package asynqx

import (
	"embed"

	"github.com/redis/go-redis/v9"

	"github.com/retryd/retryd/internal/luascript"
)

// scriptFiles holds one Lua script per operation, each starting with what
// it does, then its KEYS, ARGV and return values, one per line; a library
// (move_waiting.lua) is prepended to the scripts that use it.
//
//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is scripts/<name>.lua, after the libraries named by libs.
func script(name string, libs ...string) *redis.Script {
	return luascript.Load(scriptFiles, "", append(libs, name)...)
}
