package app_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// luaRawWrite is a script's own write of a key's members, or of the key
// as a whole, on KEYS[n] or on a local name; the line library's functions
// take the key as a parameter, so their writes are not matched.
var luaRawWrite = regexp.MustCompile(`redis\.p?call\(\s*["'](?i:zadd|zincrby|zpopmin|zpopmax|bzpopmin|bzpopmax|zrem|zremrangebyscore|` +
	`zremrangebyrank|zremrangebylex|zmpop|zunionstore|zinterstore|zdiffstore|zrangestore|del|unlink|rename|renamenx|copy|restore|set)["']\s*,\s*` +
	`(KEYS\[(\d+)\]|[A-Za-z_]\w*)`)

// luaKeyAlias is "local name = KEYS[n]".
var luaKeyAlias = regexp.MustCompile(`local\s+([A-Za-z_]\w*)\s*=\s*KEYS\[(\d+)\]`)

// rawLineWrites are the writes a script's text makes by hand on the
// places of its KEYS that held a line when it ran (slots), whatever its
// header calls them: a line changes only through the line library.
func rawLineWrites(src string, slots map[int]bool) []string {
	alias := map[string]int{}
	var out []string
	for n, line := range strings.Split(src, "\n") {
		code, _, _ := strings.Cut(line, "--")
		for _, m := range luaKeyAlias.FindAllStringSubmatch(code, -1) {
			alias[m[1]], _ = strconv.Atoi(m[2])
		}
		for _, m := range luaRawWrite.FindAllStringSubmatch(code, -1) {
			slot := alias[m[1]]
			if m[2] != "" {
				slot, _ = strconv.Atoi(m[2])
			}
			if slots[slot] {
				out = append(out, fmt.Sprintf("line %d writes KEYS[%d], a line, by hand: %s", n+1, slot, strings.TrimSpace(code)))
			}
		}
	}
	return out
}

// checkFlowScripts reads the text of each script seen with a line among
// its KEYS (flow's: no other package's may touch one) and finds no write
// of a line but through the line library.
func checkFlowScripts(t *testing.T, slots map[string]map[int]bool) {
	t.Helper()
	dir, _ := filepath.Abs("../flow/flowdb/scripts")
	names := make([]string, 0, len(slots))
	for files := range slots {
		names = append(names, files)
	}
	sort.Strings(names)
	for _, files := range names {
		for _, f := range strings.Split(files, "+") {
			src, err := os.ReadFile(filepath.Join(dir, f+".lua"))
			if err != nil {
				t.Errorf("script %s touched a line and is not internal/flow/flowdb's: %v", files, err)
				continue
			}
			for _, v := range rawLineWrites(string(src), slots[files]) {
				t.Errorf("internal/flow/flowdb/scripts/%s.lua: %s", f, v)
			}
		}
	}
	if len(names) < 3 {
		t.Fatalf("only %d flow scripts were seen with a line among their KEYS: %v", len(names), names)
	}
	t.Logf("flow scripts checked for raw line writes: %v", names)
}

// A script that takes from a line by hand is found, though its header
// does not call the key a line and the key reaches the write through a
// local name.
func TestRawLineWritesAreFoundWhateverTheHeaderSays(t *testing.T) {
	for _, c := range []struct {
		src   string
		slots map[int]bool
		want  int
	}{
		{"-- Takes a request out.\n-- KEYS[1]: the key's waiters\n-- ARGV[1]: request id\nreturn redis.pcall(\"ZREM\", KEYS[1], ARGV[1])", map[int]bool{1: true}, 1},
		{"-- KEYS[2]: its members\nlocal members = KEYS[2]\nredis.call('zadd', members, 0, ARGV[1])\nredis.call(\"DEL\", KEYS[1])", map[int]bool{2: true}, 1},
		{"lineJoin(KEYS[1], ARGV[1], 0, 1000)\nredis.call(\"ZREM\", KEYS[3], ARGV[1]) -- not a line", map[int]bool{1: true}, 0},
	} {
		if got := rawLineWrites(c.src, c.slots); len(got) != c.want {
			t.Errorf("%q: %v, want %d", c.src, got, c.want)
		}
	}
}
