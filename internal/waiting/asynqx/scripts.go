package asynqx

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

// scriptFiles holds one Lua script per operation, each starting with what
// it does, then its KEYS, ARGV and return values, one per line; a library
// (move_waiting.lua) is prepended to the scripts that use it.
//
//go:embed scripts/*.lua
var scriptFiles embed.FS

// script is scripts/<name>.lua, after the libraries named by libs.
func script(name string, libs ...string) *redis.Script {
	var src []byte
	for _, f := range append(libs, name) {
		b, err := scriptFiles.ReadFile("scripts/" + f + ".lua")
		if err != nil {
			panic("asynqx: no script " + f + ": " + err.Error())
		}
		src = append(append(src, b...), '\n')
	}
	return redis.NewScript(string(src))
}
