package tenant

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, ok := range []string{"default", "a", "team-a", "team_b", "0", strings.Repeat("x", 64)} {
		if !Valid(ok) {
			t.Errorf("Valid(%q) = false", ok)
		}
	}
	for _, bad := range []string{"", "Team", "a b", "a:b", "a/b", "é", strings.Repeat("x", 65), "a\x1fb"} {
		if Valid(bad) {
			t.Errorf("Valid(%q) = true", bad)
		}
	}
}

func TestScopeReachesItsTenantsOnly(t *testing.T) {
	var zero Scope
	cases := []struct {
		s    Scope
		name string
		want bool
	}{
		{Only("team-a"), "team-a", true},
		{Only("team-a"), "team-b", false},
		{Only("team-a"), "", false},
		{Only(""), "", true}, // a record of before tenants is the default's
		{Only("default"), "", true},
		{All, "team-b", true},
		{All, "", true},
		{zero, "default", false}, // a forgotten scope shows nothing
		{zero, "", false},
	}
	for _, c := range cases {
		if got := c.s.Has(c.name); got != c.want {
			t.Errorf("%v.Has(%q) = %v, want %v", c.s, c.name, got, c.want)
		}
	}
	if one, ok := Only("team-a").One(); !ok || one != "team-a" {
		t.Errorf("One() = %q, %v", one, ok)
	}
	if _, ok := All.One(); ok || !All.IsAll() {
		t.Error("All has one tenant")
	}
}

func TestQualifyKeepsTenantsApart(t *testing.T) {
	if Qualify("default", "k") != "k" || Qualify("", "k") != "k" {
		t.Error("the default tenant's names changed")
	}
	a, b := Qualify("team-a", "k"), Qualify("team-b", "k")
	if a == b || a == "k" {
		t.Errorf("team-a's k is %q, team-b's %q", a, b)
	}
	for _, q := range []string{a, "k", Qualify("team-b", "x:y/z")} {
		owner, name := Split(q)
		if Qualify(owner, name) != q {
			t.Errorf("Split(%q) = %q, %q does not qualify back", q, owner, name)
		}
	}
	if owner, name := Split(a); owner != "team-a" || name != "k" {
		t.Errorf("Split(%q) = %q, %q", a, owner, name)
	}
}

// A default-tenant name that spells another tenant's qualified name must
// not become it, whatever let it through the API's checks.
func TestQualifyDefaultNeverSpellsAnotherTenants(t *testing.T) {
	theirs := Qualify("acme", "acmeflow")
	for _, name := range []string{theirs, "acme" + sep, sep + "acmeflow", theirs + sep} {
		got := Qualify(Default, name)
		if got == theirs {
			t.Errorf("the default tenant's %q qualifies to acme's %q", name, theirs)
		}
		if owner, back := Split(got); owner != Default || back != name {
			t.Errorf("Split(Qualify(default, %q)) = %q, %q; want default, the name", name, owner, back)
		}
		if Qualify(Split(got)) != got {
			t.Errorf("Qualify(Split(%q)) does not give it back", got)
		}
	}
}
