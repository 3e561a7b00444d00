package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
)

// benchSecretsKey seals the bench's credential (a fixed test key).
const benchSecretsKey = "SECRETS_KEYS=MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// benchCredential is BENCH_CREDENTIAL: "oauth2" delivers every request of
// the throughput run with an OAuth2 client-credentials credential, "" with
// none.
func benchCredential() string { return os.Getenv("BENCH_CREDENTIAL") }

// startBenchTokenServer is a token endpoint that issues hour-long tokens
// and counts the token requests it answers.
func startBenchTokenServer(t testing.TB) (url string, requests *atomic.Int64) {
	requests = &atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": "bench-token", "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/token", requests
}

// useBenchCredential stores the credential the throughput run names, and
// returns the submission members that name it.
func useBenchCredential(t testing.TB, s *stack, tokenURL string) string {
	a := call(t, "PUT", s.api+"/credentials/bench-oauth",
		`{"type":"oauth2_client_credentials","tokenUrl":"`+tokenURL+`","clientId":"bench","clientSecret":"bench-secret"}`)
	if a.status != http.StatusCreated {
		t.Fatalf("PUT /credentials/bench-oauth: %d %s", a.status, a.raw)
	}
	return `,"credential":"bench-oauth"`
}
