package delayexpr

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDelayOfAllowedExpressions(t *testing.T) {
	const limit = time.Hour
	for _, tc := range []struct {
		src     string
		retried int
		want    time.Duration
	}{
		{"pow(2, retried) * 1000", 0, time.Second},
		{"pow(2, retried) * 1000", 3, 8 * time.Second},
		{"1000 * (1 + retried)", 2, 3 * time.Second},
		{"2 ** retried * 100", 4, 1600 * time.Millisecond},
		{"2 ^ retried", 3, 8 * time.Millisecond},
		{"retried % 3 * 100", 4, 100 * time.Millisecond},
		{"min(5000, max(100, retried * 1000), 4000)", 7, 4 * time.Second},
		{"abs(-250)", 0, 250 * time.Millisecond},
		{"exp(0) * 10", 9, 10 * time.Millisecond},
		{"1500 / 2", 0, 750 * time.Millisecond},
		{"floor(sqrt(16) * 100.7) + ceil(0.2) + round(0.4)", 0, 403 * time.Millisecond},
		{"-retried", 5, 0},                     // negative waits nothing
		{"pow(10, retried)", 30, limit},        // capped
		{"retried / 0", 1, limit},              // +Inf is capped too
		{"  500  ", 0, 500 * time.Millisecond}, // plain number
	} {
		e, err := Compile(tc.src)
		if err != nil {
			t.Errorf("Compile(%q): %v", tc.src, err)
			continue
		}
		got, err := e.Delay(tc.retried, limit)
		if err != nil || got != tc.want {
			t.Errorf("%q with retried=%d: %v, %v; want %v", tc.src, tc.retried, got, err, tc.want)
		}
	}
}

// Everything outside the small language is refused at compile time, with
// an error that names what is wrong.
func TestCompileRefusesWhatIsNotArithmetic(t *testing.T) {
	for src, want := range map[string]string{
		"":                              "",
		"pow(2,":                        "",
		"1..100000000":                  `".."`,
		"map(1..3, # * 2)":              "",
		`"x"`:                           "String",
		"foo * 2":                       `"foo"`,
		`len("abc")`:                    "",
		"retried > 1 ? 1 : 2":           `">"`,
		"now()":                         `"now"`,
		"let x = 1; x":                  "",
		"[1, 2][0]":                     "",
		"{a: 1}.a":                      "",
		"pow(2)":                        "pow takes 2",
		"exp(1, 2)":                     "exp takes 1",
		"min()":                         "",
		"retried.x":                     "",
		"true":                          "Bool",
		strings.Repeat("1+", 200) + "1": "longer than",
	} {
		_, err := Compile(src)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Compile(%q) = %v, want ErrInvalid", src, err)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%q) error %q does not name %s", src, err, want)
		}
	}
}

func TestRuntimeErrorIsReported(t *testing.T) {
	e, err := Compile("1000 % (retried - retried)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Delay(1, time.Hour); err == nil {
		t.Error("an integer division by zero evaluated without error")
	}
}

func TestCachedReturnsTheSameProgram(t *testing.T) {
	a, err := Cached("retried * 10")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Cached("retried * 10")
	if a != b {
		t.Error("a second Cached call compiled again")
	}
	if _, err := Cached("nope"); !errors.Is(err, ErrInvalid) {
		t.Errorf("Cached of an invalid expression: %v", err)
	}
}

// FuzzCompile: no input panics or runs away; whatever compiles evaluates
// to a delay within the limit or an error.
func FuzzCompile(f *testing.F) {
	for _, s := range []string{"pow(2, retried) * 1000", "1..9", "max(1,2)", "retried ** retried", "exp(retried*999)", "abs(-1)%0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src)
		if err != nil {
			return
		}
		for _, n := range []int{0, 1, 50} {
			d, err := e.Delay(n, time.Minute)
			if err == nil && (d < 0 || d > time.Minute) {
				t.Fatalf("%q: delay %v outside [0, 1m]", src, d)
			}
		}
	})
}
