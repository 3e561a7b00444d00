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

// Every relative link of the README and docs/ reaches a file that exists,
// resolved from the page that holds it (a link in docs/ to "docs/x.md"
// would be docs/docs/x.md), and a Markdown page's #section exists.
func TestDocLinksResolve(t *testing.T) {
	t.Parallel()
	pages, _ := filepath.Glob("../docs/*.md")
	pages = append(pages, "../README.md")
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fence := regexp.MustCompile("(?ms)^```.*?^```")
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(raw), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), file)
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s links %s, which does not exist (%s)", page, target, path)
				continue
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !headingAnchors(t, path)[anchor] {
				t.Errorf("%s links %s: no such section", page, target)
			}
		}
	}
}
