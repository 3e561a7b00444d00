package e2e

import (
	"os"
	"os/exec"
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
	Name     string `yaml:"name"`
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
		Restart     string            `yaml:"restart"`
		Networks    []string          `yaml:"networks"`
		Volumes     []string          `yaml:"volumes"`
		Deploy      struct {
			Replicas int `yaml:"replicas"`
		} `yaml:"deploy"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
	Networks map[string]struct {
		IPAM struct {
			Config []struct {
				Subnet string `yaml:"subnet"`
			} `yaml:"config"`
		} `yaml:"ipam"`
	} `yaml:"networks"`
}

// No Docker engine runs here, so this test keeps docker-compose.yml and the
// Dockerfile honest against the code: the stages exist and build the right
// programs, every variable set is one the programs read, ports match, and
// Redis gets the durability settings.
// Where a Docker engine exists (not on this CI machine), docker compose
// itself validates the file.
func TestComposeConfigValidates(t *testing.T) {
	t.Parallel()
	var cmd *exec.Cmd
	switch {
	case exec.Command("docker", "compose", "version").Run() == nil:
		cmd = exec.Command("docker", "compose", "-f", "../docker-compose.yml", "config", "--quiet")
	case exec.Command("docker-compose", "version").Run() == nil:
		cmd = exec.Command("docker-compose", "-f", "../docker-compose.yml", "config", "--quiet")
	default:
		t.Skip("neither docker compose nor docker-compose is installed; TestComposeAndDockerfileMatchThePrograms checks the file instead")
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("%v: %v\n%s", cmd.Args, err, out)
	}
}

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
			if !readEnv(k) {
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
	if len(api.Ports) != 1 || !strings.HasSuffix(api.Ports[0], ":"+port) || !strings.Contains(df, "EXPOSE "+port) {
		t.Errorf("api PORT %s, ports %v: they do not match (or the Dockerfile does not EXPOSE it)", port, api.Ports)
	}
	// Published on loopback unless the operator says otherwise.
	if len(api.Ports) == 1 && !strings.Contains(api.Ports[0], ":-127.0.0.1:"+port+"}") {
		t.Errorf("api ports %v: the default must publish on 127.0.0.1 only", api.Ports)
	}
	for name, svc := range c.Services {
		if svc.Restart != "unless-stopped" {
			t.Errorf("%s: restart %q, want unless-stopped", name, svc.Restart)
		}
		if strings.HasSuffix(svc.Image, ":latest") || (svc.Image != "" && !strings.Contains(svc.Image, ":")) {
			t.Errorf("%s: image %q is not pinned", name, svc.Image)
		}
	}
	if !regexp.MustCompile(`^redis:\d+\.\d+\.\d+$`).MatchString(c.Services["redis"].Image) {
		t.Errorf("redis image %q: pin a patch version", c.Services["redis"].Image)
	}
	// Destinations on the apps network are allowed, by exactly its subnet;
	// Redis is not on it.
	apps := c.Networks["apps"].IPAM.Config
	if len(apps) != 1 {
		t.Fatalf("no apps network with a subnet: %+v", c.Networks)
	}
	// ALLOWED_CIDRS follows APPS_SUBNET: it defaults to the very
	// expression of the network's subnet.
	for _, svc := range []string{"api", "worker"} {
		if got, want := c.Services[svc].Environment["ALLOWED_CIDRS"], "${ALLOWED_CIDRS:-"+apps[0].Subnet+"}"; got != want {
			t.Errorf("%s: ALLOWED_CIDRS %q, want %q (the apps subnet, APPS_SUBNET included)", svc, got, want)
		}
		if !slices.Contains(c.Services[svc].Networks, "apps") {
			t.Errorf("%s is not on the apps network", svc)
		}
	}
	// A fixed project name, whatever the checkout's folder is called (the
	// apps network is retryd_apps), and every variable the docs tell users
	// to set reaches the programs that read it.
	if c.Name != "retryd" {
		t.Errorf("compose project name %q, want retryd", c.Name)
	}
	for svc, names := range map[string][]string{
		"api":    {"API_KEYS", "ADMIN_KEYS", "RATE_LIMIT_RPS", "SIGNING_SECRETS", "CALLBACK_SIGNING_SECRET", "QSTASH_CURRENT_SIGNING_KEY", "QSTASH_NEXT_SIGNING_KEY"},
		"worker": {"API_KEYS", "ADMIN_KEYS", "SIGNING_SECRETS", "CALLBACK_SIGNING_SECRET", "QSTASH_CURRENT_SIGNING_KEY", "QSTASH_NEXT_SIGNING_KEY"},
	} {
		for _, n := range names {
			if v, ok := c.Services[svc].Environment[n]; !ok || !strings.Contains(v, "${"+n) {
				t.Errorf("%s: %s is not passed from the environment (%q)", svc, n, v)
			}
		}
	}
	// What both programs read (the configuration table's "both"), the
	// compose file gives both, alike.
	for _, name := range bothPrograms(t) {
		a, inAPI := c.Services["api"].Environment[name]
		w, inWorker := c.Services["worker"].Environment[name]
		if inAPI != inWorker || a != w {
			t.Errorf("%s: api %q (set: %v), worker %q (set: %v); both programs read it and must agree", name, a, inAPI, w, inWorker)
		}
	}
	checkComposePrometheus(t, c)
	if slices.Contains(c.Services["redis"].Networks, "apps") {
		t.Error("redis is on the apps network, where destinations could reach it")
	}
	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil || !regexp.MustCompile(`(?m)^\.git$`).Match(ignore) || !strings.Contains(string(ignore), "node_modules") {
		t.Errorf(".dockerignore missing or incomplete: %v", err)
	}
	if !strings.Contains(df, `HEALTHCHECK --interval=10s --timeout=4s CMD ["/retryd-worker", "-healthcheck"]`) {
		t.Error("the worker image has no HEALTHCHECK")
	}
	if regexp.MustCompile(`(?m)^FROM golang:\d+\.\d+ AS`).MatchString(df) || strings.Contains(df, ":latest") {
		t.Error("the Dockerfile's base images are not pinned")
	}
	worker := c.Services["worker"]
	if worker.Deploy.Replicas != 2 {
		t.Errorf("worker replicas %d, want 2", worker.Deploy.Replicas)
	}
	if worker.Environment["METRICS_ADDR"] == "" {
		t.Error("worker has no METRICS_ADDR, so its healthcheck has nothing to ask")
	}
	if worker.Environment["GOMAXPROCS"] != "1" {
		t.Errorf("worker GOMAXPROCS %q, want 1 (docs/benchmarks.md: one P per worker process)", worker.Environment["GOMAXPROCS"])
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

// goRuntimeEnv are the Go runtime's own settings a deployment may set on
// retryd's programs.
var goRuntimeEnv = []string{"GOMAXPROCS", "GOGC", "GOMEMLIMIT"}

// readEnv says whether retryd's programs read environment variable k:
// their configuration, or the Go runtime's.
func readEnv(k string) bool {
	return slices.Contains(config.Names, k) || slices.Contains(goRuntimeEnv, k)
}

// bothPrograms are the variables docs/operating.md's configuration table
// says both programs read.
func bothPrograms(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile(`(?m)^\| (.+?) \| both \|`).FindAllStringSubmatch(string(doc), -1) {
		for _, n := range regexp.MustCompile("`([A-Z_]+)`").FindAllStringSubmatch(m[1], -1) {
			out = append(out, n[1])
		}
	}
	if len(out) < 10 {
		t.Fatalf("found %d variables of both programs in docs/operating.md: %v", len(out), out)
	}
	return out
}

// The monitoring profile's Prometheus scrapes the API and every worker
// replica, on the ports they listen on, with an admin key: both answer
// /metrics to nothing else.
func checkComposePrometheus(t *testing.T, c composeFile) {
	t.Helper()
	p, ok := c.Services["prometheus"]
	if !ok {
		t.Fatal("compose has no prometheus service: nothing scrapes the metrics the alerts read")
	}
	mounted := false
	for _, v := range p.Volumes {
		mounted = mounted || strings.HasPrefix(v, "./deployments/prometheus.yml:/etc/prometheus/prometheus.yml")
	}
	if !mounted {
		t.Errorf("prometheus does not run deployments/prometheus.yml: %v", p.Volumes)
	}
	raw, err := os.ReadFile("../deployments/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var conf promConfig
	if err := yaml.Unmarshal(raw, &conf); err != nil {
		t.Fatalf("deployments/prometheus.yml: %v", err)
	}
	api, worker := conf.job("retryd-api"), conf.job("retryd-worker")
	if api == nil || worker == nil {
		t.Fatalf("deployments/prometheus.yml lacks the retryd-api or retryd-worker job: %+v", conf)
	}
	if len(api.Static) != 1 || !slices.Equal(api.Static[0].Targets, []string{"api:" + c.Services["api"].Environment["PORT"]}) {
		t.Errorf("retryd-api job targets %+v, want api:PORT", api.Static)
	}
	port, _ := strconv.Atoi(strings.TrimPrefix(c.Services["worker"].Environment["METRICS_ADDR"], ":"))
	if len(worker.DNSSD) != 1 || !slices.Equal(worker.DNSSD[0].Names, []string{"worker"}) || worker.DNSSD[0].Port != port {
		t.Errorf("retryd-worker job %+v, want every worker replica by DNS on METRICS_ADDR's port %d", worker.DNSSD, port)
	}
	script := strings.Join(p.Command, " ")
	for _, job := range []*promJob{api, worker} {
		if f := job.Authorization.CredentialsFile; f == "" || !strings.Contains(script, "> "+f) {
			t.Errorf("job %s: credentials file %q, which the prometheus service does not write (%q)", job.Name, f, script)
		}
	}
	if !strings.Contains(p.Environment["RETRYD_METRICS_KEY"], "${ADMIN_KEYS") {
		t.Errorf("prometheus' key does not default to ADMIN_KEYS: %q", p.Environment["RETRYD_METRICS_KEY"])
	}
}
