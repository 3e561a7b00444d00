package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/retryd/retryd/internal/config"
)

type composeFile struct {
	Services map[string]struct {
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Build   struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
			Target     string `yaml:"target"`
		} `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
		Deploy      struct {
			Replicas int `yaml:"replicas"`
		} `yaml:"deploy"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

// No Docker engine runs here, so this test keeps docker-compose.yml and the
// Dockerfile honest against the code: the stages exist and build the right
// programs, every variable set is one the programs read, ports match, and
// Redis gets the durability settings.
func TestComposeAndDockerfileMatchThePrograms(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(raw, &c); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	for _, name := range []string{"redis", "api", "worker"} {
		if _, ok := c.Services[name]; !ok {
			t.Fatalf("compose lacks service %q", name)
		}
	}
	dockerfile, err := os.ReadFile(filepath.Join("..", c.Services["api"].Build.Dockerfile))
	if err != nil {
		t.Fatalf("api build.dockerfile: %v", err)
	}
	df := string(dockerfile)
	for svc, cmd := range map[string]string{"api": "./cmd/api", "worker": "./cmd/worker"} {
		s := c.Services[svc]
		if s.Build.Context != "." {
			t.Errorf("%s: build context %q, want .", svc, s.Build.Context)
		}
		if _, err := os.Stat(filepath.Join("..", cmd)); err != nil {
			t.Errorf("%s builds %s, which does not exist", svc, cmd)
		}
		// The stage named by the target copies the binary built from cmd.
		stage := regexp.MustCompile(`(?ms)^FROM \S+ AS ` + s.Build.Target + `\n(.*?)(?:^FROM |\z)`).FindStringSubmatch(df)
		if stage == nil {
			t.Fatalf("%s: Dockerfile has no stage %q", svc, s.Build.Target)
		}
		binary := "/retryd-" + svc
		if !strings.Contains(stage[1], `ENTRYPOINT ["`+binary+`"]`) {
			t.Errorf("%s: stage %q does not run %s", svc, s.Build.Target, binary)
		}
		if !strings.Contains(df, "-o /out"+binary+" "+cmd) {
			t.Errorf("%s: Dockerfile does not build %s from %s", svc, binary, cmd)
		}
		for k := range s.Environment {
			if !slices.Contains(config.Names, k) {
				t.Errorf("%s sets %s, which retryd does not read", svc, k)
			}
		}
		if len(s.Healthcheck.Test) < 2 || s.Healthcheck.Test[1] != binary || s.Healthcheck.Test[2] != "-healthcheck" {
			t.Errorf("%s healthcheck %v, want %s -healthcheck", svc, s.Healthcheck.Test, binary)
		}
		if !strings.HasPrefix(s.Environment["REDIS_URL"], "redis://redis:") {
			t.Errorf("%s REDIS_URL %q does not point at the redis service", svc, s.Environment["REDIS_URL"])
		}
	}
	api := c.Services["api"]
	port := api.Environment["PORT"]
	if port == "" {
		port = strconv.Itoa(config.DefaultPort)
	}
	if !slices.Contains(api.Ports, port+":"+port) || !strings.Contains(df, "EXPOSE "+port) {
		t.Errorf("api PORT %s, ports %v: they do not match (or the Dockerfile does not EXPOSE it)", port, api.Ports)
	}
	worker := c.Services["worker"]
	if worker.Deploy.Replicas != 2 {
		t.Errorf("worker replicas %d, want 2", worker.Deploy.Replicas)
	}
	if worker.Environment["METRICS_ADDR"] == "" {
		t.Error("worker has no METRICS_ADDR, so its healthcheck has nothing to ask")
	}

	redis := c.Services["redis"]
	var conf string
	for _, v := range redis.Volumes {
		if strings.HasPrefix(v, "./deployments/redis.conf:") {
			conf = strings.SplitN(v, ":", 3)[1]
		}
	}
	if conf == "" || !slices.Contains(redis.Command, conf) {
		t.Fatalf("redis does not run with deployments/redis.conf: volumes %v command %v", redis.Volumes, redis.Command)
	}
	rc, err := os.ReadFile("../deployments/redis.conf")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"appendonly yes", "appendfsync always", "maxmemory-policy noeviction"} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).Match(rc) {
			t.Errorf("deployments/redis.conf lacks %q", line)
		}
	}
}
