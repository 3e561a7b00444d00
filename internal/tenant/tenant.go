// Package tenant names the teams that share one retryd, and the scope of
// what a caller may see and act on: one tenant (its API key's) or every
// tenant (an admin key).
package tenant

import "strings"

// Default is the tenant of a bare API key, of every record written before
// tenants existed, and of every request when no keys are configured.
const Default = "default"

// MaxLen bounds a tenant name.
const MaxLen = 64

// Valid reports whether name is a tenant name: 1–64 of [a-z0-9_-].
func Valid(name string) bool {
	if len(name) == 0 || len(name) > MaxLen {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Of is the tenant a stored name stands for: "" (a record of before
// tenants) is Default.
func Of(name string) string {
	if name == "" {
		return Default
	}
	return name
}

// Scope is the tenants a caller reaches. Its zero value reaches none, so a
// forgotten scope hides everything rather than showing everything.
type Scope struct {
	one string
	all bool
}

// Only is the scope of one tenant.
func Only(name string) Scope { return Scope{one: Of(name)} }

// All is the scope of an admin key, and of retryd's own processes.
var All = Scope{all: true}

// Has reports whether the scope reaches the records of tenant name.
func (s Scope) Has(name string) bool { return s.all || (s.one != "" && s.one == Of(name)) }

// One is the scope's tenant; ok is false for All (and the zero Scope).
func (s Scope) One() (name string, ok bool) { return s.one, s.one != "" }

// IsAll reports whether the scope reaches every tenant.
func (s Scope) IsAll() bool { return s.all }

// String names the scope in logs and errors.
func (s Scope) String() string {
	switch {
	case s.all:
		return "all tenants"
	case s.one != "":
		return "tenant " + s.one
	}
	return "no tenant"
}

// sep joins a tenant to a name it chose. Names a client chooses (a
// flow-control key) hold no control characters, so a qualified name never
// equals one a client wrote.
const sep = "\x1f"

// Qualify is the name a tenant's own name (a flow-control key) has inside
// retryd, apart from every other tenant's same name: the default tenant's
// names are what they were before tenants. The API refuses names with
// control characters, but should one reach here, a default name holding
// sep is qualified too: left bare, "acme\x1fkey" of the default tenant
// would be acme's "key".
func Qualify(t, name string) string {
	if t = Of(t); t == Default && !strings.Contains(name, sep) {
		return name
	}
	return t + sep + name
}

// Split is Qualify undone: the tenant a qualified name belongs to and the
// name the tenant chose.
func Split(qualified string) (t, name string) {
	if t, name, ok := strings.Cut(qualified, sep); ok {
		return t, name
	}
	return Default, qualified
}
