// Package delayexpr evaluates QStash's retry-delay expressions
// (Upstash-Retry-Delay): the milliseconds to wait before a retry, written
// in `retried`, the number of retries made so far (0 before the first
// retry). It uses expr-lang/expr, held to a small language: numbers,
// `retried`, arithmetic (+ - * / % and ** or ^), and the functions pow,
// exp, min, max, abs, sqrt, floor, ceil and round. Anything else
// (strings, members, closures, ranges, other builtins) is refused when the
// expression is compiled, so an expression cannot allocate or loop; the
// result is capped by the caller's limit.
package delayexpr

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
)

// MaxLen bounds an expression's length.
const MaxLen = 256

// Expr is a compiled retry-delay expression.
type Expr struct {
	src     string
	program *vm.Program
}

// ErrInvalid wraps every compile-time refusal.
var ErrInvalid = errors.New("invalid retry delay expression")

// functions are the callable names and their arity (-1: one or more):
// the pow, exp, min, max and abs, plus sqrt, floor, ceil and round,
// which QStash's documentation also lists.
var functions = map[string]int{"pow": 2, "exp": 1, "min": -1, "max": -1, "abs": 1, "sqrt": 1, "floor": 1, "ceil": 1, "round": 1}

const allowedNames = "retried, pow, exp, min, max, abs, sqrt, floor, ceil and round"

// Compile checks src against the allowed language and compiles it.
func Compile(src string) (*Expr, error) {
	if len(src) > MaxLen {
		return nil, fmt.Errorf("%w: longer than %d characters", ErrInvalid, MaxLen)
	}
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, firstLine(err.Error()))
	}
	v := &checker{}
	ast.Walk(&tree.Node, v)
	if v.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, v.err)
	}
	program, err := expr.Compile(src,
		expr.Env(map[string]any{"retried": 0}),
		expr.DisableAllBuiltins(),
		expr.Function("pow", func(p ...any) (any, error) { return math.Pow(num(p[0]), num(p[1])), nil }, new(func(float64, float64) float64)),
		expr.Function("exp", func(p ...any) (any, error) { return math.Exp(num(p[0])), nil }, new(func(float64) float64)),
		expr.Function("abs", func(p ...any) (any, error) { return math.Abs(num(p[0])), nil }, new(func(float64) float64)),
		unary("sqrt", math.Sqrt), unary("floor", math.Floor), unary("ceil", math.Ceil), unary("round", math.Round),
		expr.Function("min", fold(math.Min), new(func(float64, ...float64) float64)),
		expr.Function("max", fold(math.Max), new(func(float64, ...float64) float64)),
		expr.AsFloat64(),
	)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, firstLine(err.Error()))
	}
	return &Expr{src: src, program: program}, nil
}

func unary(name string, f func(float64) float64) expr.Option {
	return expr.Function(name, func(p ...any) (any, error) { return f(num(p[0])), nil }, new(func(float64) float64))
}

func fold(f func(a, b float64) float64) func(p ...any) (any, error) {
	return func(p ...any) (any, error) {
		acc := num(p[0])
		for _, x := range p[1:] {
			acc = f(acc, num(x))
		}
		return acc, nil
	}
}

// num is an argument as a float: the checker lets only numbers through,
// but retried and integer literals arrive as ints.
func num(v any) float64 {
	switch x := v.(type) {
	case float64:
		return x
	case int:
		return float64(x)
	}
	return math.NaN()
}

func firstLine(s string) string {
	for i, c := range s {
		if c == '\n' {
			return s[:i]
		}
	}
	return s
}

// checker refuses every node outside the allowed language.
type checker struct{ err error }

func (c *checker) Visit(node *ast.Node) {
	if c.err != nil {
		return
	}
	switch n := (*node).(type) {
	case *ast.IntegerNode, *ast.FloatNode:
	case *ast.IdentifierNode:
		if n.Value != "retried" {
			if _, fn := functions[n.Value]; !fn {
				c.err = fmt.Errorf("unknown name %q: only %s may be used", n.Value, allowedNames)
			}
		}
	case *ast.UnaryNode:
		if n.Operator != "-" && n.Operator != "+" {
			c.err = fmt.Errorf("operator %q is not allowed", n.Operator)
		}
	case *ast.BinaryNode:
		switch n.Operator {
		case "+", "-", "*", "/", "%", "**", "^":
		default:
			c.err = fmt.Errorf("operator %q is not allowed: only + - * / %% ** ^", n.Operator)
		}
	case *ast.CallNode:
		id, ok := n.Callee.(*ast.IdentifierNode)
		if !ok {
			c.err = errors.New("only the functions of " + allowedNames + " may be called")
			return
		}
		want, fn := functions[id.Value]
		switch {
		case !fn:
			c.err = fmt.Errorf("unknown function %q: only %s", id.Value, allowedNames)
		case want > 0 && len(n.Arguments) != want:
			c.err = fmt.Errorf("%s takes %d argument(s)", id.Value, want)
		case want < 0 && len(n.Arguments) < 1:
			c.err = fmt.Errorf("%s takes at least one argument", id.Value)
		}
	case *ast.BuiltinNode:
		want, fn := functions[n.Name]
		if !fn || (want > 0 && len(n.Arguments) != want) || len(n.Arguments) == 0 {
			c.err = fmt.Errorf("function %q is not allowed (or has the wrong arguments): only %s", n.Name, allowedNames)
		}
	default:
		c.err = fmt.Errorf("%s is not allowed: only numbers, arithmetic and %s",
			strings.TrimSuffix(strings.TrimPrefix(fmt.Sprintf("%T", n), "*ast."), "Node"), allowedNames)
	}
}

// String is the expression's source.
func (e *Expr) String() string { return e.src }

// Delay is the wait before the retry that follows `retried` retries,
// capped at limit. A result that is not a number (NaN) is an error; a
// negative one waits 0.
func (e *Expr) Delay(retried int, limit time.Duration) (time.Duration, error) {
	out, err := vm.Run(e.program, map[string]any{"retried": retried})
	if err != nil {
		return 0, fmt.Errorf("evaluate %q: %w", e.src, err)
	}
	ms, _ := out.(float64)
	switch {
	case math.IsNaN(ms):
		return 0, fmt.Errorf("evaluate %q: not a number", e.src)
	case ms <= 0:
		return 0, nil
	case ms >= float64(limit.Milliseconds()):
		return limit, nil
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// cache keeps compiled expressions, so a worker compiles each once; it is
// emptied when full rather than grown.
var cache struct {
	sync.Mutex
	m map[string]*Expr
}

const cacheSize = 1024

// Cached compiles src, or returns it compiled before.
func Cached(src string) (*Expr, error) {
	cache.Lock()
	e := cache.m[src]
	cache.Unlock()
	if e != nil {
		return e, nil
	}
	e, err := Compile(src)
	if err != nil {
		return nil, err
	}
	cache.Lock()
	if cache.m == nil || len(cache.m) >= cacheSize {
		cache.m = map[string]*Expr{}
	}
	cache.m[src] = e
	cache.Unlock()
	return e, nil
}
