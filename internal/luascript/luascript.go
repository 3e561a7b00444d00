// Package luascript loads retryd's Lua scripts from a package's embedded
// scripts/ folder: each a file of its own, headed by its KEYS, ARGV and
// Returns, with the libraries it uses put first.
package luascript

import (
	"io/fs"

	"github.com/redis/go-redis/v9"
)

// Load is prefix, then scripts/<f>.lua of fsys for each of files in
// order (the libraries, then the script itself), as one script. A missing
// file is a programming error: it panics at package init.
func Load(fsys fs.FS, prefix string, files ...string) *redis.Script {
	src := []byte(prefix)
	for _, f := range files {
		b, err := fs.ReadFile(fsys, "scripts/"+f+".lua")
		if err != nil {
			panic("luascript: no script " + f + ": " + err.Error())
		}
		src = append(append(src, b...), '\n')
	}
	return redis.NewScript(string(src))
}
