// Package luascript loads retryd's Lua scripts from a package's embedded
// scripts/ folder: each a file of its own, headed by its KEYS, ARGV and
// Returns, with the libraries it uses put first.
package luascript

import (
	"crypto/sha1"
	"encoding/hex"
	"io/fs"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// built maps the SHA1 of every script Load made to the files it was made
// of, so that a check of the commands sent to Redis can tell a script
// loaded from .lua files from one written in a Go string.
var built sync.Map // sha1 hex -> "file+file"

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
	sum := sha1.Sum(src)
	built.Store(hex.EncodeToString(sum[:]), strings.Join(files, "+"))
	return redis.NewScript(string(src))
}

// Known says whether sha (lower-case hex SHA1, as EVALSHA names a script)
// is a script Load made.
func Known(sha string) bool {
	_, ok := built.Load(strings.ToLower(sha))
	return ok
}

// Files are the .lua files (without folder and extension, libraries
// first, joined by "+") of the script Load made whose SHA1 is sha; "" for
// one it did not make.
func Files(sha string) string {
	v, _ := built.Load(strings.ToLower(sha))
	s, _ := v.(string)
	return s
}
