package waiting

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// mayImportGoRedis are the packages (below the module) that may import
// go-redis, each with why. Any other importer fails
// TestOnlyListedPackagesImportGoRedis: a package that needs Redis asks one
// of these, which own its keys.
var mayImportGoRedis = map[string]string{
	"handlers":                    "holds the client for flow's key and endpoint routes; calls none itself",
	"tasks":                       "hands the client to internal/waiting (bell, owner); calls none itself",
	"internal/app":                "makes the Redis clients and wires them into the rest",
	"internal/batch":              "sends concurrent callers' commands as one pipeline",
	"internal/credentials":        "stores sealed credentials and tokens under its own keys",
	"internal/flow":               "takes the client flow's I/O (flowdb) works with; calls none itself",
	"internal/flow/flowdb":        "flow control's I/O: its gates' state and the waiting lines, through its scripts",
	"internal/luascript":          "builds the *redis.Script of every .lua file",
	"internal/record":             "the request store",
	"internal/redistest":          "test Redis servers and clients",
	"internal/redistest/keywatch": "a test hook watching every command a client sends",
	"internal/sweeper":            "its lock, and retention sweeps through record",
	"internal/waiting":            "the owner: makes tasks sleep and run",
	"internal/waiting/asynqx":     "the owner's reads and writes of asynq's keys",
	"internal/waiting/timer":      "the owner's timer of waiting tasks",
	"internal/workflow":           "the Upstash Workflow runs' logs, under their own keys",
}

// mayCallGoRedis are the packages that may call go-redis (a client's
// commands, a script's Run, redis.NewScript...), each with why; the other
// importers only hold a client and pass it on. A package calls go-redis
// when it uses one of go-redis' functions or methods, whether or not it
// imports go-redis: a method of a client held in another package's field
// counts.
var mayCallGoRedis = map[string]string{
	"internal/app":                "makes clients (NewClient, ParseURL), pings, adds the doorbell hook",
	"internal/batch":              "runs pipelines and scripts for its callers",
	"internal/credentials":        "its own keys and scripts",
	"internal/flow/flowdb":        "flow's gates' state; lines only through its scripts (TestOnlyTheOwnerMovesTasks)",
	"internal/luascript":          "redis.NewScript of a script built from .lua files",
	"internal/record":             "the request store's keys and scripts",
	"internal/redistest":          "starts and flushes test servers",
	"internal/redistest/keywatch": "reads each command's arguments",
	"internal/sweeper":            "takes and releases its lock",
	"internal/waiting":            "the owner",
	"internal/waiting/asynqx":     "the owner's commands on asynq's keys",
	"internal/waiting/timer":      "the owner's timer",
	"internal/workflow":           "its own keys and scripts",
}

// moduleTree lists the module (once per test binary).
func moduleTree(t *testing.T) *tree {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := loadTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(tr.pkgs) < 30 {
		t.Fatalf("listed only %d packages under %s: is the module root right?", len(tr.pkgs), root)
	}
	return tr
}

// rel is a module package's path below the module.
func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, module), "/") }

// importViolations are the packages (path -> imports) that import
// go-redis without being listed, and the listed ones that no longer do.
func importViolations(imports map[string][]string) []string {
	var out []string
	for path, imps := range imports {
		_, listed := mayImportGoRedis[rel(path)]
		if importsGoRedis(imps) && !listed {
			out = append(out, fmt.Sprintf("%s imports go-redis: ask a package that owns the keys (or list it in mayImportGoRedis with why)", rel(path)))
		}
	}
	for p := range mayImportGoRedis {
		if imps, ok := imports[module+"/"+p]; !ok || !importsGoRedis(imps) {
			out = append(out, fmt.Sprintf("%s is listed in mayImportGoRedis but does not import go-redis: take it off", p))
		}
	}
	sort.Strings(out)
	return out
}

// The packages that import go-redis are the listed ones.
func TestOnlyListedPackagesImportGoRedis(t *testing.T) {
	tr := moduleTree(t)
	imports := map[string][]string{}
	for _, p := range tr.pkgs {
		imports[p.ImportPath] = p.Imports
	}
	for _, v := range importViolations(imports) {
		t.Error(v)
	}
}

// callViolations are where package path (with planted files, name ->
// source) calls go-redis without being listed in mayCallGoRedis.
func callViolations(tr *tree, path string, planted map[string]string) ([]string, error) {
	if _, ok := mayCallGoRedis[rel(path)]; ok {
		return nil, nil
	}
	calls, err := tr.goRedisCalls(path, planted)
	for i, c := range calls {
		calls[i] = rel(path) + "/" + c + ": only the packages of mayCallGoRedis call go-redis"
	}
	return calls, err
}

// Only the listed packages call go-redis; the others (tasks, handlers)
// merely hold a client and hand it on, found by the types the calls
// resolve to, not by names.
func TestOnlyListedPackagesCallGoRedis(t *testing.T) {
	tr := moduleTree(t)
	checked := 0
	for _, p := range tr.pkgs {
		if !p.dependsOnGoRedis() {
			continue // it cannot reach a go-redis function
		}
		checked++
		v, err := callViolations(tr, p.ImportPath, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range v {
			t.Error(s)
		}
	}
	if checked < 20 {
		t.Fatalf("checked only %d packages", checked)
	}
	for p := range mayCallGoRedis {
		if _, ok := tr.byPth[module+"/"+p]; !ok {
			t.Errorf("%s is listed in mayCallGoRedis but is no package: take it off", p)
		}
	}
}

// The structure checks are not fooled by how a file hides its intent: a
// key built by fmt.Sprintf, a script in a Go string, a write queued on a
// pipeline, a client's method called without importing go-redis.
func TestStructureCheckFindsPlantedFiles(t *testing.T) {
	tr := moduleTree(t)
	planted := []struct {
		pkg, name, src, want string
	}{
		{"tasks", "plant_zrem.go", `package tasks
import ("context"; "fmt"; "github.com/redis/go-redis/v9")
func plantedMove(ctx context.Context, rdb redis.UniversalClient, q, id string) error {
	if err := rdb.Do(ctx, "ZREM", fmt.Sprintf("asynq:{%s}:scheduled", q), id).Err(); err != nil { return err }
	return rdb.Do(ctx, "LPUSH", fmt.Sprintf("%s:{%s}:%s", "asynq", q, "pending"), id).Err()
}`, "UniversalClient).Do"},
		{"tasks", "plant_script.go", `package tasks
import "github.com/redis/go-redis/v9"
var plantedScript = redis.NewScript("return redis.pcall('ZREM', KEYS[1], ARGV[1])")`, "v9.NewScript"},
		{"handlers", "plant_pipe.go", `package handlers
import ("context"; "github.com/redis/go-redis/v9")
func (f *Flows) plantedTake(ctx context.Context, key, id string) error {
	_, err := f.RDB.Pipelined(ctx, func(p redis.Pipeliner) error { return p.ZRem(ctx, key, id).Err() })
	return err
}`, "SortedSetCmdable).ZRem"},
		{"handlers", "plant_noimport.go", `package handlers
import "context"
func (f *Flows) plantedDrop(ctx context.Context, key, id string) { f.RDB.ZRem(ctx, key, id) }`, "SortedSetCmdable).ZRem"},
	}
	for _, p := range planted {
		v, err := callViolations(tr, module+"/"+p.pkg, map[string]string{p.name: p.src})
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		found := false
		for _, s := range v {
			found = found || (strings.Contains(s, p.name) && strings.Contains(s, p.want))
		}
		if !found {
			t.Errorf("planted %s in %s: not found (%v)", p.name, p.pkg, v)
		}
	}
	// A new package importing go-redis fails the import check.
	imports := map[string][]string{}
	for _, p := range tr.pkgs {
		imports[p.ImportPath] = p.Imports
	}
	imports[module+"/internal/planted"] = []string{"context", goRedis}
	if v := importViolations(imports); len(v) != 1 || !strings.Contains(v[0], "internal/planted imports go-redis") {
		t.Errorf("a planted importer: %v, want it alone", v)
	}
}
