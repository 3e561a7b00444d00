package config

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every variable Load reads says which program reads it, and the
// configuration table of docs/operating.md says the same.
func TestOperatingDocNamesTheProgramOfEverySetting(t *testing.T) {
	t.Parallel()
	for _, name := range Names {
		if _, ok := Programs[name]; !ok {
			t.Errorf("%s has no entry in Programs", name)
		}
	}
	doc, err := os.ReadFile("../../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	label := map[Program]string{API: "API", Worker: "worker", Both: "both"}
	row := regexp.MustCompile("(?m)^\\| (`[A-Z_0-9]+`(?:, `[A-Z_0-9]+`)*) \\| ([a-zA-Z]+) \\|")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(doc), -1) {
		for _, name := range strings.Split(m[1], ", ") {
			name = strings.Trim(name, "`")
			seen[name] = true
			if want := label[Programs[name]]; m[2] != want {
				t.Errorf("docs/operating.md says %s is read by %q; Programs says %q", name, m[2], want)
			}
		}
	}
	for _, name := range Names {
		if !seen[name] {
			t.Errorf("docs/operating.md's configuration table has no row naming the program of %s", name)
		}
	}
}

// Fate names secrets only by id, and only the settings the program reads.
func TestFateNamesSecretsByIDOnly(t *testing.T) {
	t.Parallel()
	c := Config{SigningSecrets: []string{"whsec_c2VjcmV0"}, CallbackSigningSecret: "cb-secret", QStashCurrentSigningKey: "sig_x"}
	worker := c.Fate(Worker)
	for name, v := range worker {
		for _, secret := range []string{"whsec_c2VjcmV0", "cb-secret", "sig_x"} {
			if strings.Contains(v, secret) {
				t.Errorf("%s records the secret itself: %q", name, v)
			}
		}
	}
	if _, ok := worker["MAX_UNFINISHED_PER_KEY"]; ok {
		t.Error("a worker records MAX_UNFINISHED_PER_KEY, which only the API reads")
	}
	if api := c.Fate(API); api["ALLOW_PRIVATE_TARGETS"] == "" || api["SIGNING_SECRETS"] != "" {
		t.Errorf("the API's recorded settings are wrong: %v", api)
	}
}
