package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// headingAnchors are the anchors a Markdown file's headings get (GitHub's
// rule: lower case, punctuation dropped, spaces to dashes).
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	drop := regexp.MustCompile("[^a-z0-9 _-]")
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		anchors[strings.ReplaceAll(drop.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return anchors
}

// Every page and section the deployment files' comments point a deployer
// at exists: docs/NAME.md, and its #section when one is named. A
// reference to the README by a section's name is refused: sections move,
// and a name is not a link.
func TestDeploymentCommentsPointAtPagesThatExist(t *testing.T) {
	t.Parallel()
	files := []string{"../docker-compose.yml", "../deployments/Dockerfile", "../deployments/redis.conf", "../deployments/k8s-secret.example.yaml"}
	k8s, _ := filepath.Glob("../deployments/k8s/*.yaml")
	files = append(files, k8s...)
	ref := regexp.MustCompile(`docs/([a-z-]+\.md)(#[a-z0-9_-]+)?`)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile(`README[^\n]*"[^"\n]+"`).Find(raw); m != nil {
			t.Errorf("%s names a README section (%s): point at a docs page and its #section", f, m)
		}
		for _, m := range ref.FindAllStringSubmatch(string(raw), -1) {
			page := filepath.Join("../docs", m[1])
			if _, err := os.Stat(page); err != nil {
				t.Errorf("%s points at %s, which does not exist", f, m[0])
				continue
			}
			if m[2] != "" && !headingAnchors(t, page)[strings.TrimPrefix(m[2], "#")] {
				t.Errorf("%s points at %s: no such section", f, m[0])
			}
		}
	}
}
