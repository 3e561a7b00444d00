package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// credentials create stores a credential from a JSON file; list and get
// show it without its secret; a request and an endpoint's settings name
// it; delete removes it; rekey answers how many it resealed.
func TestCredentials(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "partner.json")
	if err := os.WriteFile(file, []byte(`{"type":"oauth2_client_credentials","tokenUrl":"https://auth.example.com/token","clientId":"retryd","clientSecret":"cl1ent-s3cret"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := ctl(t, base, "credentials", "create", "partner", "--from-file", file)
	if code != 0 || !strings.Contains(out, "partner oauth2_client_credentials stored") {
		t.Fatalf("credentials create (%d): %s%s", code, out, errOut)
	}
	proxy := filepath.Join(dir, "egress.json")
	_ = os.WriteFile(proxy, []byte(`{"type":"proxy","url":"http://proxy.example.com:3128"}`), 0o600)
	if _, errOut, code := ctl(t, base, "credentials", "create", "egress", "-f", proxy); code != 0 {
		t.Fatalf("create the proxy (%d): %s", code, errOut)
	}
	out, _, code = ctl(t, base, "credentials", "list")
	if code != 0 || !strings.Contains(out, "NAME") || !strings.Contains(out, "retryd at https://auth.example.com/token") ||
		!strings.Contains(out, "http://proxy.example.com:3128") || strings.Contains(out, "cl1ent-s3cret") {
		t.Errorf("credentials list (%d):\n%s", code, out)
	}
	out, _, code = ctl(t, base, "credentials", "get", "partner")
	if code != 0 || !strings.Contains(out, "token url:") || !strings.Contains(out, "client id:") || strings.Contains(out, "cl1ent-s3cret") {
		t.Errorf("credentials get (%d):\n%s", code, out)
	}
	out, _, _ = ctl(t, base, "--json", "credentials", "get", "partner")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["type"] != "oauth2_client_credentials" || strings.Contains(out, "cl1ent-s3cret") {
		t.Errorf("--json credentials get: %v %s", err, out)
	}

	// What the API refuses, retryctl says, naming the member.
	bad := filepath.Join(dir, "bad.json")
	_ = os.WriteFile(bad, []byte(`{"type":"bearer"}`), 0o600)
	if _, errOut, code := ctl(t, base, "credentials", "create", "x", "--from-file", bad); code == 0 || !strings.Contains(errOut, "token is required") {
		t.Errorf("a body without its token: exit %d, stderr %q", code, errOut)
	}
	_ = os.WriteFile(bad, []byte(`{"type":`), 0o600)
	if _, errOut, code := ctl(t, base, "credentials", "create", "x", "--from-file", bad); code == 0 || !strings.Contains(errOut, "not a JSON document") {
		t.Errorf("a file that is not JSON: exit %d, stderr %q", code, errOut)
	}
	if _, errOut, code := ctl(t, base, "credentials", "create", "x"); code == 0 || !strings.Contains(errOut, "from-file") {
		t.Errorf("no --from-file: exit %d, stderr %q", code, errOut)
	}

	out, errOut, code = ctl(t, base, "endpoints", "settings", "https://api.example.com:443", "--credential", "partner", "--proxy", "egress")
	if code != 0 || !strings.Contains(out, "https://api.example.com:443 credential partner proxy egress") {
		t.Errorf("endpoints settings set (%d): %s%s", code, out, errOut)
	}
	out, _, _ = ctl(t, base, "endpoints", "settings", "https://api.example.com:443")
	if !strings.Contains(out, "credential partner proxy egress") {
		t.Errorf("endpoints settings: %s", out)
	}
	// One flag changes one default, and keeps the other.
	if out, errOut, code := ctl(t, base, "endpoints", "settings", "https://api.example.com:443", "--proxy", ""); code != 0 || !strings.Contains(out, "credential partner proxy (none)") {
		t.Errorf("endpoints settings --proxy \"\" (%d): %s%s; want the credential kept", code, out, errOut)
	}
	if _, errOut, code := ctl(t, base, "endpoints", "settings", "https://api.example.com:443", "--credential", "egress"); code == 0 || !strings.Contains(errOut, "a proxy") {
		t.Errorf("a proxy as the credential: exit %d, stderr %q", code, errOut)
	}
	out, _, code = ctl(t, base, "endpoints", "settings", "https://api.example.com:443", "--clear")
	if code != 0 || !strings.Contains(out, "settings removed") {
		t.Errorf("endpoints settings --clear (%d): %s", code, out)
	}
	if out, _, _ := ctl(t, base, "endpoints", "settings", "https://api.example.com:443"); !strings.Contains(out, "credential (none) proxy (none)") {
		t.Errorf("after --clear: %s", out)
	}

	out, errOut, code = ctl(t, base, "submit", "https://example.com/hook", "--credential", "partner", "--proxy", "egress", "--delay", "1h")
	if code != 0 {
		t.Fatalf("submit naming them (%d): %s%s", code, out, errOut)
	}
	id := strings.Fields(out)[0]
	if out, _, _ := ctl(t, base, "get", id); !strings.Contains(out, "credential:") || !strings.Contains(out, "partner") || !strings.Contains(out, "egress") {
		t.Errorf("get shows no credential and proxy:\n%s", out)
	}
	if _, errOut, code := ctl(t, base, "submit", "https://example.com/hook", "--credential", "nope"); code == 0 || !strings.Contains(errOut, "does not exist") {
		t.Errorf("submit naming a credential that does not exist: exit %d, stderr %q", code, errOut)
	}

	out, _, code = ctl(t, base, "credentials", "rekey")
	if code != 0 || !strings.Contains(out, "0 resealed") {
		t.Errorf("credentials rekey (%d): %s", code, out)
	}
	out, _, code = ctl(t, base, "credentials", "delete", "partner")
	if code != 0 || !strings.Contains(out, "partner deleted") {
		t.Errorf("credentials delete (%d): %s", code, out)
	}
	if _, errOut, code := ctl(t, base, "credentials", "get", "partner"); code == 0 || !strings.Contains(errOut, "404") {
		t.Errorf("get after delete: exit %d, stderr %q", code, errOut)
	}
}

// signing-secrets create shows an hmac secret once (an ed25519 one, its
// public key); list shows ids and fingerprints, never the secret; delete
// removes one.
func TestSigningSecrets(t *testing.T) {
	t.Parallel()
	base := apiFor(t)
	out, errOut, code := ctl(t, base, "signing-secrets", "create")
	secret := regexp.MustCompile(`secret: (whsec_\S+)`).FindStringSubmatch(out)
	if code != 0 || secret == nil || !strings.Contains(out, "shown this once") {
		t.Fatalf("signing-secrets create (%d): %s%s", code, out, errOut)
	}
	id := strings.Fields(out)[0]
	out, _, code = ctl(t, base, "signing-secrets", "create", "--type", "ed25519")
	if code != 0 || !strings.Contains(out, "ed25519") || !strings.Contains(out, "public key: whpk_") {
		t.Errorf("create --type ed25519 (%d): %s", code, out)
	}
	if _, errOut, code := ctl(t, base, "signing-secrets", "create", "--type", "rsa"); code == 0 || !strings.Contains(errOut, "ed25519") {
		t.Errorf("--type rsa: exit %d, stderr %q", code, errOut)
	}
	out, _, code = ctl(t, base, "signing-secrets", "list")
	if code != 0 || !strings.Contains(out, "FINGERPRINT") || !strings.Contains(out, id) || strings.Contains(out, secret[1]) || strings.Count(out, "ss_") != 2 {
		t.Errorf("signing-secrets list (%d):\n%s", code, out)
	}
	out, _, code = ctl(t, base, "signing-secrets", "delete", id)
	if code != 0 || !strings.Contains(out, id+" deleted") {
		t.Errorf("signing-secrets delete (%d): %s", code, out)
	}
	if _, errOut, code := ctl(t, base, "signing-secrets", "delete", id); code == 0 || !strings.Contains(errOut, "404") {
		t.Errorf("delete again: exit %d, stderr %q", code, errOut)
	}
}
