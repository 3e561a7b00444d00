package redact

import (
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Names that hold a secret word only inside a longer word are shown as
// sent, as headers and as query keys.
var shownNames = []string{
	"bypass-tunnel-reminder", "Bypass-Tunnel-Reminder", "X-Author", "X-Design", "Monkey", "X-Keyboard", "X-Passenger-Count",
	"author", "design", "passenger", "X-Authored-By", "authority", "X-Signal", "signup", "keynote", "X-Tokenizer",
	"secretary", "X-Possession", "torchbearer", "X-Compass", "whiskey", "X-Turnkey", "passport", "X-Max3-Count",
	"Content-Type", "Accept", "X-Request-Id", "User-Agent", "test-header", "country_code", "zip_code", "code2", "page",
	"X-Public", "Upstash-Forward-bypass-tunnel-reminder", "", "-", "256",
}

// Names with a secret word among their words are hidden.
var secretNamesList = []string{
	// what a substring once caught, and still must
	"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key", "Upstash-Signature", "X-Hub-Signature-256",
	"Stripe-Signature", "X-Auth-Token", "Auth", "Authentication-Info", "X-Client-Secret", "X-Password", "Credentials",
	"X-Session-Id", "X-Session", "session_id", "X-Auth-User", "token", "api_key", "access_token", "apikey", "accesstoken",
	"xapikey", "X-APIKEY", "XApiKey", "apiKey", "APIKey", "accessToken", "AUTH_TOKEN", "authtoken", "refresh_token",
	"clientsecret", "sessionid", "secret", "Secret", "sig", "X-Sig", "X-Signature", "jwt", "X-Jwt", "id_jwt", "pwd", "X-Pwd",
	"passwd", "pass", "passphrase", "password", "Credential", "code", "CODE", "Code", "oauth_token", "oauth_verifier",
	"X-Amz-Security-Token", "X-Amz-Signature", "X-Amz-Credential", "Private-Token", "X-Csrf-Token", "Ocp-Apim-Subscription-Key",
	"X-Goog-Api-Key", "X-Hasura-Admin-Secret", "X-Vault-Token", "X-Webhook-Secret",
	// what a substring missed
	"X-Shopify-Hmac-Sha256", "pw", "X-Pw", "code_verifier", "mypassword", "githubToken", "webhooksecret", "api-keys",
	"X-Secrets", "tokens", "otp", "sign", "X-Private-Key", "privatekey", "X-Bearer",
}

func TestNamesAreSecretByWholeWords(t *testing.T) {
	t.Parallel()
	for _, name := range shownNames {
		if Header(name) || Param(name) {
			t.Errorf("%q is redacted (header %v, query key %v); want it shown as sent", name, Header(name), Param(name))
		}
	}
	for _, name := range secretNamesList {
		if !Header(name) || !Param(name) {
			t.Errorf("%q is shown (header secret %v, query secret %v); want it redacted", name, Header(name), Param(name))
		}
	}
}

func TestWordsSplitsNames(t *testing.T) {
	t.Parallel()
	for name, want := range map[string][]string{
		"X-Api-Key":              {"x", "api", "key"},
		"X-Shopify-Hmac-Sha256":  {"x", "shopify", "hmac", "sha", "256"},
		"apiKey":                 {"api", "key"},
		"APIKey":                 {"api", "key"},
		"XApiKey":                {"x", "api", "key"},
		"X-APIKEY":               {"x", "apikey"},
		"access_token.v2":        {"access", "token", "v", "2"},
		"bypass-tunnel-reminder": {"bypass", "tunnel", "reminder"},
		"Größe-Key":              {"größe", "key"},
		"--":                     nil,
	} {
		if got := words(name); !slices.Equal(got, want) {
			t.Errorf("words(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestURLRedactsQueryKeysByWholeWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"https://e.com/h?author=a&design=d&passenger=p&page=2": "https://e.com/h?author=a&design=d&passenger=p&page=2",
		"https://e.com/h?pw=p&apikey=k&accessToken=t&x=1":      "https://e.com/h?pw=[REDACTED]&apikey=[REDACTED]&accessToken=[REDACTED]&x=1",
		"https://e.com/h?X-Amz-Signature=s&X-Amz-Date=d":       "https://e.com/h?X-Amz-Signature=[REDACTED]&X-Amz-Date=d",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

// A value that carries a credential scheme is a secret under any header
// name; a value that merely starts with such a word is not.
func TestCredentialValuesAreSecretUnderAnyName(t *testing.T) {
	t.Parallel()
	hidden := map[string]string{"X-Upstream": "Basic dXNlcjpwYXNz", "X-Fwd": "Token abc", "X-Other": "bearer abc", "X-Caps": "BEARER abc",
		"X-Digest": `Digest username="u", response="r"`, "X-Aws": "AWS4-HMAC-SHA256 Credential=AKIA/x, Signature=s",
		"X-Lead": "  Bearer\tabc", "X-Neg": "Negotiate YII=", "X-Okta": "SSWS 00abc"}
	shown := map[string]string{"X-Plain": "Bearerish", "X-Word": "Bearer", "X-Empty": "Basic   ", "X-Note": "Basically fine",
		"Content-Type": "application/json", "X-Tokenizer": "3", "bypass-tunnel-reminder": "client-test"}
	in := map[string]string{}
	for k, v := range hidden {
		in[k] = v
	}
	for k, v := range shown {
		in[k] = v
	}
	got := Headers(in)
	for k, v := range hidden {
		if got[k] != Mask {
			t.Errorf("%s: %q shown as %q, want %s", k, v, got[k], Mask)
		}
	}
	for k, v := range shown {
		if got[k] != v {
			t.Errorf("%s: %q shown as %q, want it as sent", k, v, got[k])
		}
	}
	if in["X-Upstream"] != hidden["X-Upstream"] {
		t.Error("Headers changed its argument")
	}
}

// FuzzNameAndValue checks that a name is judged by its words alone, and
// that Headers and URL apply exactly that judgement. Its seeds run with
// the normal tests.
func FuzzNameAndValue(f *testing.F) {
	for _, n := range append(slices.Clone(shownNames), secretNamesList...) {
		f.Add(n, "v")
	}
	f.Add("X-Upstream", "Basic dXNlcjpwYXNz")
	f.Add("X-Fwd", "Token abc")
	f.Add("a&b=c#d", "x y")
	f.Add("\xff\xfeKey", "bearer \xff")
	f.Fuzz(func(t *testing.T, name, value string) {
		secret := Name(name)
		if again := Name(strings.Join(words(name), "_")); again != secret {
			t.Errorf("Name(%q) = %v but Name of its words %q = %v", name, secret, words(name), again)
		}
		if Header(name) != secret || Param(name) != secret {
			t.Errorf("%q: Name %v, Header %v, Param %v; want one answer", name, secret, Header(name), Param(name))
		}
		if HeaderValue(name, value) != (secret || credential(value)) {
			t.Errorf("HeaderValue(%q, %q) = %v", name, value, HeaderValue(name, value))
		}
		want := value
		if HeaderValue(name, value) {
			want = Mask
		}
		if got := Headers(map[string]string{name: value})[name]; got != want {
			t.Errorf("Headers{%q: %q} shows %q, want %q", name, value, got, want)
		}
		raw := "https://e.com/p?" + url.QueryEscape(name) + "=" + url.QueryEscape(value) + "&page=2"
		wantURL := raw
		if secret {
			wantURL = "https://e.com/p?" + url.QueryEscape(name) + "=" + Mask + "&page=2"
		}
		if got := URL(raw); got != wantURL {
			t.Errorf("URL(%q) = %q, want %q", raw, got, wantURL)
		}
	})
}

// docs/security.md names every word and scheme the rule uses: what it
// says is hidden is what is hidden.
func TestSecurityDocNamesEveryWordAndScheme(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "### What is redacted")
	section, _, _ = strings.Cut(section, "\n#")
	named := map[string]bool{}
	for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(section, -1) {
		named[strings.ToLower(m[1])] = true
	}
	for what, list := range map[string][]string{"secret word": slices.Collect(maps.Keys(secretWords)),
		"joining word": slices.Collect(maps.Keys(joinWords)), "credential scheme": slices.Collect(maps.Keys(credentialSchemes))} {
		for _, w := range list {
			if !named[w] {
				t.Errorf("docs/security.md does not name the %s %q", what, w)
			}
		}
	}
}
