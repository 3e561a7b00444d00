package submit

import (
	"strings"
	"testing"
)

// BenchmarkParse decodes the submission make bench sends: a 1 KiB body,
// a method and one header.
func BenchmarkParse(b *testing.B) {
	body := []byte(`{"url":"http://127.0.0.1:9/bench","method":"POST","body":"` + strings.Repeat("x", 1024) +
		`","headers":{"Content-Type":"application/octet-stream"}}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := Parse(body, now); err != nil {
			b.Fatal(err)
		}
	}
}
