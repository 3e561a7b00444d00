// Package keywatch is a go-redis hook for tests that says which package
// touched which key, however the key's name was built: it reads the keys
// off each command as sent, and names as the command's author the first
// caller on the stack that is not go-redis, a hook, or one of retryd's
// plumbing packages (batching, script loading, test Redis). It then checks
// who may touch what: asynq's keys belong to internal/waiting (and asynq),
// a waiting line is written only by internal/flow/flowdb's scripts, and every
// script retryd runs was loaded from .lua files.
package keywatch

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"runtime"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Module is retryd's module path; packages are named below it.
const Module = "github.com/retryd/retryd/"

// The rules a command may break.
const (
	RuleAsynqKeys = "asynq-keys: only internal/waiting (and asynq itself, on its own or for a listed package) touches asynq's keys"
	RuleLineWrite = "line-write: a waiting line is written only by a script of internal/flow/flowdb"
	RuleScript    = "script-source: every script retryd runs is loaded from .lua files"
)

// plumbing are retryd's packages that carry other packages' commands: a
// command is their caller's.
var plumbing = []string{"internal/redistest", "internal/batch", "internal/luascript"}

// Config says what the watcher knows of retryd.
type Config struct {
	// IsAsynq says whether key is one of asynq's.
	IsAsynq func(key string) bool
	// IsLine says whether key is a waiting line.
	IsLine func(key string) bool
	// KnownScript says whether sha is a script loaded from .lua files,
	// and names them (asynq's task writes of a submission are allowed to
	// internal/record's "create" script).
	KnownScript func(sha string) (files string, ok bool)
	// Via are the retryd packages (besides internal/waiting) that may
	// reach asynq's keys through a library (asynq's client or inspector,
	// asynqmon), each with why.
	Via map[string]string
}

// Violation is a command that broke a rule.
type Violation struct {
	Rule, By, Cmd, Key, Script string
}

func (v Violation) String() string {
	s := fmt.Sprintf("%s: %s sent %s on %q", v.Rule, v.By, v.Cmd, v.Key)
	if v.Script != "" {
		s += " (script " + v.Script + ")"
	}
	return s
}

// Watcher is the hook. Install it on a client before any other hook, so
// that no other hook's frames stand between it and the command's author.
type Watcher struct {
	cfg Config

	mu         sync.Mutex
	violations []Violation
	seen       map[string]int      // "by cmd class" -> count
	keys       map[string][]string // class -> a few keys seen
	lineSlots  map[string]map[int]bool
}

// New returns a Watcher checking by cfg.
func New(cfg Config) *Watcher {
	return &Watcher{cfg: cfg, seen: map[string]int{}, keys: map[string][]string{}, lineSlots: map[string]map[int]bool{}}
}

// DialHook implements redis.Hook.
func (w *Watcher) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook implements redis.Hook.
func (w *Watcher) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		w.check(author(), cmd)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook implements redis.Hook.
func (w *Watcher) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		by := author()
		for _, c := range cmds {
			w.check(by, c)
		}
		return next(ctx, cmds)
	}
}

// Violations are the rules broken so far.
func (w *Watcher) Violations() []Violation {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]Violation(nil), w.violations...)
}

// Seen counts the commands by author (a retryd package relative to the
// module, or a library's path), command name and class of key ("asynq",
// "line" or "other"): key "by CMD class".
func (w *Watcher) Seen() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.seen))
	for k, v := range w.seen {
		out[k] = v
	}
	return out
}

// LineSlots are, for each script run from .lua files (named by its files,
// "lib+name"), the places in its KEYS (from 1) that held a line: what a
// check of the script's text needs to know, whatever its header says.
func (w *Watcher) LineSlots() map[string]map[int]bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]map[int]bool, len(w.lineSlots))
	for f, m := range w.lineSlots {
		out[f] = make(map[int]bool, len(m))
		for i := range m {
			out[f][i] = true
		}
	}
	return out
}

// Keys are a few keys of class seen so far.
func (w *Watcher) Keys(class string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.keys[class]...)
}

// check records cmd, sent by by, and the rules it breaks.
func (w *Watcher) check(by string, cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) == 0 {
		return
	}
	name := strings.ToUpper(fmt.Sprint(args[0]))
	keys, script := commandKeys(name, args)
	who := strings.Fields(by)
	ours := !strings.Contains(who[0], ".") // a retryd package, not a library
	via := ""
	if len(who) == 3 {
		via = who[2]
	}
	var files string
	var known bool
	if script != "" {
		sha := script
		if name == "EVAL" || name == "EVAL_RO" {
			sum := sha1.Sum([]byte(script))
			sha = hex.EncodeToString(sum[:])
		}
		files, known = w.cfg.KnownScript(strings.ToLower(sha))
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	add := func(rule, key string) {
		w.violations = append(w.violations, Violation{Rule: rule, By: by, Cmd: name, Key: key, Script: files})
	}
	if script != "" && ours && !known {
		add(RuleScript, strings.Join(keys, " "))
	}
	for i, k := range keys {
		class := "other"
		switch {
		case w.cfg.IsAsynq(k):
			class = "asynq"
			// record's submission script writes a new request's pending
			// task (as asynq's enqueue would) in the same step as its record.
			owner := isOwner(by) || (by == "internal/record" && files == "create")
			_, listed := w.cfg.Via[via]
			if (ours && !owner) || (via != "" && !isOwner(via) && !listed) {
				add(RuleAsynqKeys, k)
			}
		case w.cfg.IsLine(k):
			class = "line"
			if files != "" {
				if w.lineSlots[files] == nil {
					w.lineSlots[files] = map[int]bool{}
				}
				w.lineSlots[files][i+1] = true
			}
			if !lineReads[name] && !(script != "" && by == "internal/flow/flowdb") {
				add(RuleLineWrite, k)
			}
		}
		w.seen[by+" "+name+" "+class]++
		if len(w.keys[class]) < 20 && !contains(w.keys[class], k) {
			w.keys[class] = append(w.keys[class], k)
		}
	}
}

// isOwner says whether retryd package p is internal/waiting or below it.
func isOwner(p string) bool {
	return p == "internal/waiting" || strings.HasPrefix(p, "internal/waiting/")
}

func contains(s []string, k string) bool {
	for _, x := range s {
		if x == k {
			return true
		}
	}
	return false
}

// lineReads are the commands that read a sorted set and write nothing.
var lineReads = map[string]bool{
	"ZCARD": true, "ZCOUNT": true, "ZRANGE": true, "ZRANGEBYSCORE": true, "ZREVRANGEBYSCORE": true, "ZRANGEBYLEX": true,
	"ZREVRANGE": true, "ZRANK": true, "ZREVRANK": true, "ZSCORE": true, "ZMSCORE": true, "ZSCAN": true, "ZRANDMEMBER": true,
	"EXISTS": true, "TYPE": true, "TTL": true, "PTTL": true, "EVAL_RO": true, "EVALSHA_RO": true,
}

// keyless are the commands whose arguments name no key.
var keyless = map[string]bool{
	"PING": true, "INFO": true, "SCRIPT": true, "CLIENT": true, "HELLO": true, "AUTH": true, "SELECT": true,
	"TIME": true, "WAIT": true, "MULTI": true, "EXEC": true, "DISCARD": true, "PUBLISH": true, "COMMAND": true,
	"CONFIG": true, "DBSIZE": true, "FLUSHALL": true, "FLUSHDB": true, "SCAN": true, "CLUSTER": true,
	"READONLY": true, "ECHO": true, "SUBSCRIBE": true, "PSUBSCRIBE": true, "UNSUBSCRIBE": true, "PUNSUBSCRIBE": true,
	"MEMORY": true, "SLOWLOG": true, "LATENCY": true, "ROLE": true, "QUIT": true, "WAITAOF": true,
}

// commandKeys are the keys a command names, and for a script the script
// (EVAL) or its SHA1 (EVALSHA). Other commands name their first argument;
// those that name several keys name all of them.
func commandKeys(name string, args []any) (keys []string, script string) {
	str := func(i int) string { return fmt.Sprint(args[i]) }
	switch {
	case keyless[name] || len(args) < 2:
		return nil, ""
	case name == "EVAL" || name == "EVALSHA" || name == "EVAL_RO" || name == "EVALSHA_RO":
		n := 0
		if len(args) > 2 {
			_, _ = fmt.Sscan(str(2), &n)
		}
		for i := 3; i < 3+n && i < len(args); i++ {
			keys = append(keys, str(i))
		}
		return keys, str(1)
	case name == "DEL" || name == "UNLINK" || name == "EXISTS" || name == "MGET" || name == "TOUCH" || name == "WATCH":
		for i := 1; i < len(args); i++ {
			keys = append(keys, str(i))
		}
	case name == "BLPOP" || name == "BRPOP" || name == "BZPOPMIN" || name == "BZPOPMAX":
		for i := 1; i < len(args)-1; i++ {
			keys = append(keys, str(i))
		}
	case name == "LMOVE" || name == "BLMOVE" || name == "RPOPLPUSH" || name == "BRPOPLPUSH" || name == "RENAME" ||
		name == "RENAMENX" || name == "SMOVE" || name == "ZRANGESTORE" || name == "COPY":
		keys = []string{str(1)}
		if len(args) > 2 {
			keys = append(keys, str(2))
		}
	default:
		keys = []string{str(1)}
	}
	return keys, ""
}

// author is the command's author: the first caller, innermost first, that
// is neither the runtime, go-redis, a hook, nor retryd's plumbing. A
// retryd package is named relative to the module ("internal/flow"); a
// library (asynq, asynqmon, redis_rate) by its import path, so that what
// asynq sends through its own API is asynq's; then " via " and the retryd
// package that called the library, if any.
func author() string {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	by := ""
	for {
		f, more := frames.Next()
		pkg := pkgOf(f.Function)
		switch {
		case pkg == "" || !strings.Contains(strings.SplitN(pkg, "/", 2)[0], "."): // the standard library
		case strings.HasPrefix(pkg, "github.com/redis/go-redis/"):
		case strings.Contains(f.Function, ".ProcessHook") || strings.Contains(f.Function, ".ProcessPipelineHook"):
		case strings.HasPrefix(pkg, Module):
			rel := strings.TrimPrefix(pkg, Module)
			switch {
			case isPlumbing(rel):
			case by == "":
				return rel
			default:
				return by + " via " + rel
			}
		case by == "":
			by = pkg
		}
		if !more {
			if by == "" {
				return "unknown"
			}
			return by
		}
	}
}

func isPlumbing(rel string) bool {
	for _, p := range plumbing {
		if rel == p || strings.HasPrefix(rel, p+"/") {
			return true
		}
	}
	return false
}

// pkgOf is the import path of a function's symbol name
// ("example.com/a/b.(*T).M" is "example.com/a/b").
func pkgOf(fn string) string {
	slash := strings.LastIndex(fn, "/")
	dot := strings.Index(fn[slash+1:], ".")
	if dot < 0 {
		return fn
	}
	return fn[:slash+1+dot]
}
