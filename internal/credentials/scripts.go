package credentials

import (
	"embed"

	"github.com/redis/go-redis/v9"
)

//go:embed scripts/*.lua
var scriptFiles embed.FS

func script(name string) *redis.Script {
	src, err := scriptFiles.ReadFile("scripts/" + name)
	if err != nil {
		panic("credentials: missing script " + name) // embedded at build time
	}
	return redis.NewScript(string(src))
}

// The package's scripts (scripts/*.lua).
var (
	dropScript      = script("drop_if.lua")
	addCappedScript = script("add_capped.lua")
	replaceScript   = script("replace_if.lua")
)
