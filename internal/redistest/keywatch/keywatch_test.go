package keywatch

import (
	"slices"
	"strings"
	"testing"
)

// A command's keys are read off its arguments as sent: a script's from
// its key count, a multi-key command's all of them, none of a command
// that names no key.
func TestCommandKeys(t *testing.T) {
	for _, c := range []struct {
		args   []any
		keys   []string
		script string
	}{
		{[]any{"evalsha", "abc", 2, "k1", "k2", "a1"}, []string{"k1", "k2"}, "abc"},
		{[]any{"eval", "return 1", 0}, nil, "return 1"},
		{[]any{"zrem", "line", "id"}, []string{"line"}, ""},
		{[]any{"del", "a", "b"}, []string{"a", "b"}, ""},
		{[]any{"blpop", "a", "b", 5}, []string{"a", "b"}, ""},
		{[]any{"lmove", "src", "dst", "LEFT", "RIGHT"}, []string{"src", "dst"}, ""},
		{[]any{"ping"}, nil, ""},
		{[]any{"script", "load", "return 1"}, nil, ""},
	} {
		keys, script := commandKeys(strings.ToUpper(c.args[0].(string)), c.args)
		if !slices.Equal(keys, c.keys) || script != c.script {
			t.Errorf("%v: keys %v script %q, want %v %q", c.args, keys, script, c.keys, c.script)
		}
	}
}
