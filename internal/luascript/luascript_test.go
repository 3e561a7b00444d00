package luascript

import (
	"testing"
	"testing/fstest"
)

// Load remembers each script it builds by the SHA1 that EVALSHA names it
// by, and of which files; a script it did not build is unknown.
func TestLoadRemembersItsScripts(t *testing.T) {
	fsys := fstest.MapFS{"scripts/lib.lua": {Data: []byte("local x = 1")}, "scripts/s.lua": {Data: []byte("return x")}}
	s := Load(fsys, "-- prefix\n", "lib", "s")
	if !Known(s.Hash()) || Files(s.Hash()) != "lib+s" {
		t.Fatalf("Known(%s) = %v, Files = %q", s.Hash(), Known(s.Hash()), Files(s.Hash()))
	}
	if Known("0000000000000000000000000000000000000000") {
		t.Fatal("an unknown script is known")
	}
}
