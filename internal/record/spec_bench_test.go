package record

import (
	"strings"
	"testing"
)

// benchSubmission is the request make bench submits: a 1 KiB body, a method
// and one header.
func benchSubmission() *Request {
	return &Request{URL: "http://127.0.0.1:9/bench", Method: "POST", Body: strings.Repeat("x", 1024),
		Headers: map[string]string{"Content-Type": "application/octet-stream"}, IdempotencyKey: "k"}
}

// BenchmarkSpec: a request's spec, encoded at submission and decoded at
// each attempt's begin.
func BenchmarkSpec(b *testing.B) {
	b.Run("encode", func(b *testing.B) {
		r := benchSubmission()
		b.ReportAllocs()
		for b.Loop() {
			_ = r.spec()
		}
	})
	b.Run("decode", func(b *testing.B) {
		s := benchSubmission().spec()
		h := map[string]string{fStatus: "pending", fMaxRetries: "5", fCreatedAt: "1700000000000"}
		b.ReportAllocs()
		for b.Loop() {
			_ = decode("id", h, s)
		}
	})
}
