package client_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hibiken/asynq"

	"github.com/retryd/retryd/client"
	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
	"github.com/retryd/retryd/internal/redistest"
)

// Resend and Expunge against the whole API in process (no worker).
func TestResendAndExpunge(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfg, err := config.Load(func(k string) string {
		return map[string]string{"REDIS_URL": srv.URL, "ALLOW_PRIVATE_TARGETS": "true", "API_KEYS": "k"}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	e, closeEngine := app.APIEngine(cfg, srv.Client(), asynq.RedisClientOpt{Addr: srv.Addr}, app.EngineOptions{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(closeEngine)
	ts := httptest.NewServer(e)
	t.Cleanup(ts.Close)
	c := client.New(ts.URL, "k")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	acc, err := c.Submit(ctx, client.Submission{URL: "https://example.com/x", Body: "b", DelayMs: 3_600_000}, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, acc.ID); err != nil {
		t.Fatal(err)
	}
	n, err := c.Resend(ctx, acc.ID, client.ResendInput{Actor: "erin", Reason: "lost"}, "key-1")
	if err != nil || n.ResentFrom == nil || n.ResentFrom.ID != acc.ID || n.ResentFrom.Actor != "erin" || n.Status != "pending" {
		t.Fatalf("Resend = %+v, %v", n, err)
	}
	if again, err := c.Resend(ctx, acc.ID, client.ResendInput{}, "key-1"); err != nil || again.ID != n.ID {
		t.Errorf("Resend with the same key = %+v, %v; want %s", again, err, n.ID)
	}
	var apiErr *client.Error
	if _, err := c.Resend(ctx, n.ID, client.ResendInput{}, ""); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("Resend of a pending request: %v, want a 409", err)
	}
	r, err := c.Expunge(ctx, acc.ID, client.ExpungeInput{Actor: "dpo"})
	if err != nil || !r.Expunged || r.ExpungedBy == nil || *r.ExpungedBy != "dpo" || r.ExpungedAt == nil || len(r.Resends) != 1 {
		t.Errorf("Expunge = %+v, %v", r, err)
	}
	if _, err := c.Expunge(ctx, n.ID, client.ExpungeInput{}); !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict {
		t.Errorf("Expunge of a pending request: %v, want a 409", err)
	}
}
