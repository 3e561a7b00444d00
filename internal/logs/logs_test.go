package logs

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Repeated warnings are written once per window, the next one with the
// count left out; info lines and other messages pass.
func TestDedupSummarisesRepeats(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.UnixMilli(1_700_000_000_000)
	h := Dedup(slog.NewJSONHandler(&buf, nil)).(*dedup)
	h.now = func() time.Time { return now }
	log := slog.New(h).With("component", "asynq")
	for range 351 {
		log.Error("could not dequeue: connection refused")
	}
	log.Info("progress")
	log.Info("progress")
	log.Warn("another problem")
	slog.New(h).With("component", "go-redis").Error("could not dequeue: connection refused")
	now = now.Add(Window)
	log.Error("could not dequeue: connection refused")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 6 {
		t.Fatalf("%d lines, want 6:\n%s", len(lines), buf.String())
	}
	var last map[string]any
	_ = json.Unmarshal([]byte(lines[5]), &last)
	if last["repeated"] != 350.0 {
		t.Errorf("the line after the window: %s, want repeated 350", lines[5])
	}
}

func TestRedisLinesGoThroughSlog(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	Redis{L: slog.New(slog.NewJSONHandler(&buf, nil)).With("component", "go-redis")}.Printf(context.Background(), "redis: %s failed\n", "dial")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil || line["msg"] != "redis: dial failed" || line["component"] != "go-redis" || line["level"] != "WARN" {
		t.Errorf("line %s: %v", buf.String(), err)
	}
}
