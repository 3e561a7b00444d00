package names

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckRefuses(t *testing.T) {
	tests := []struct {
		name  string
		kind  Kind
		value string
		want  string // in the message; "" for accepted
	}{
		{"plain flow key", FlowKey, "tenant-1", ""},
		{"flow key at its limit", FlowKey, strings.Repeat("k", 255), ""},
		{"flow key over its limit", FlowKey, strings.Repeat("k", 256), "at most 255 bytes, got 256"},
		{"unit separator", FlowKey, "acme\x1facmeflow", "control characters (one at byte 4"},
		{"NUL", Topic, "a\x00", "control characters"},
		{"newline", Label, "a\nb", "control characters"},
		{"DEL", Queue, "q\x7f", "control characters"},
		{"C1 control", ScheduleID, "s\u0085", "control characters"},
		{"label at its limit", Label, strings.Repeat("l", 256), ""},
		{"label over its limit", Label, strings.Repeat("l", 257), "a label is at most 256 bytes, got 257"},
		{"dedup id over its limit", DedupID, strings.Repeat("d", 900_000), "at most 256 bytes, got 900000"},
		{"idempotency key over its limit", IdempotencyKey, strings.Repeat("i", 256), "at most 255 bytes"},
		{"endpoint name over its limit", EndpointName, strings.Repeat("e", 129), "at most 128 bytes"},
		{"filter value over its limit", FilterValue, strings.Repeat("f", 2049), "at most 2048 bytes"},
		{"unicode letters", Label, "café ☕", ""},
		{"empty", Label, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.kind.Check("Upstash-Label", tt.value)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want accepted", Quote(tt.value), err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Check(%s) = %v, want a *Error", Quote(tt.value), err)
			}
			if e.Field != "Upstash-Label" || !strings.HasPrefix(e.Message, "Upstash-Label: ") {
				t.Errorf("error %q does not name its field", e.Message)
			}
			if !strings.Contains(e.Message, tt.want) {
				t.Errorf("error %q, want it to say %q", e.Message, tt.want)
			}
			if len(e.Message) > 200 {
				t.Errorf("error is %d bytes: it echoes the value", len(e.Message))
			}
		})
	}
}

func TestQuoteIsShort(t *testing.T) {
	if got := Quote("short"); got != `"short"` {
		t.Errorf("Quote(short) = %s", got)
	}
	long := strings.Repeat("é", 100) // two bytes each: the cut must not split one
	got := Quote(long)
	if !strings.HasSuffix(got, "…") || len(got) > quoteMax+8 || !utf8.ValidString(got) {
		t.Errorf("Quote(200 bytes) = %s", got)
	}
}

func TestCleanDropsControls(t *testing.T) {
	if got := Clean("a\x1fb\nc\x7f\u0085"); got != "abc" {
		t.Errorf("Clean = %q, want abc", got)
	}
	if got := Clean("plain"); got != "plain" {
		t.Errorf("Clean(plain) = %q", got)
	}
}

// FuzzCheck: whatever a client sends, Check accepts it exactly when it is
// within the limit and free of control characters, and its refusal is
// short.
func FuzzCheck(f *testing.F) {
	for _, seed := range []string{"", "tenant-1", "acme\x1facmeflow", "a\x00b", "q\x7f", "s\u0085", "café", "\xff\xfe",
		strings.Repeat("x", 256), strings.Repeat("x", 257)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, k := range Kinds {
			err := k.Check("field", v)
			wantOK := len(v) <= k.Max && ControlAt(v) < 0
			if (err == nil) != wantOK {
				t.Fatalf("%s: Check(%q) = %v, want accepted %v", k.What, v, err, wantOK)
			}
			if err != nil && len(err.Error()) > 250 {
				t.Fatalf("%s: error of %d bytes", k.What, len(err.Error()))
			}
			if err == nil && strings.ContainsAny(v, "\x00\x1f\n\r\x7f") {
				t.Fatalf("%s: accepted %q", k.What, v)
			}
		}
		if c := Clean(v); ControlAt(c) >= 0 {
			t.Fatalf("Clean(%q) = %q holds a control character", v, c)
		}
	})
}
