package e2e

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/retryd/retryd/internal/app"
	"github.com/retryd/retryd/internal/config"
)

type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Ports []struct {
			TargetPort string `yaml:"targetPort"`
		} `yaml:"ports"`
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		MinAvailable   *int `yaml:"minAvailable"`
		MaxUnavailable *int `yaml:"maxUnavailable"`
		Template       struct {
			Metadata struct {
				Labels      map[string]string `yaml:"labels"`
				Annotations map[string]string `yaml:"annotations"`
			} `yaml:"metadata"`
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				SecurityContext               struct {
					RunAsNonRoot bool `yaml:"runAsNonRoot"`
				} `yaml:"securityContext"`
				Containers []struct {
					Name  string `yaml:"name"`
					Image string `yaml:"image"`
					Ports []struct {
						Name          string `yaml:"name"`
						ContainerPort int    `yaml:"containerPort"`
					} `yaml:"ports"`
					Env []struct {
						Name  string `yaml:"name"`
						Value string `yaml:"value"`
					} `yaml:"env"`
					LivenessProbe   *probe `yaml:"livenessProbe"`
					ReadinessProbe  *probe `yaml:"readinessProbe"`
					SecurityContext struct {
						ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
						AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
						Capabilities             struct {
							Drop []string `yaml:"drop"`
						} `yaml:"capabilities"`
					} `yaml:"securityContext"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
		Port string `yaml:"port"`
	} `yaml:"httpGet"`
}

// The Kubernetes manifests agree with the programs: variables exist, ports
// match PORT and METRICS_ADDR, probes hit /healthz and /readyz on declared
// ports, and the worker gets time to drain.
func TestKubernetesManifestsMatchThePrograms(t *testing.T) {
	t.Parallel()
	// What kubectl apply -k renders: the resources of kustomization.yaml.
	var kust struct {
		Resources []string `yaml:"resources"`
	}
	raw, err := os.ReadFile("../deployments/k8s/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &kust); err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, r := range kust.Resources {
		files = append(files, filepath.Join("../deployments/k8s", r))
	}
	// Every manifest of the directory is rendered, and no Secret example
	// sits where kubectl apply -f deployments/k8s/ would pick it up.
	all, _ := filepath.Glob("../deployments/k8s/*.yaml")
	for _, f := range all {
		if base := filepath.Base(f); base != "kustomization.yaml" && !slices.Contains(kust.Resources, base) {
			t.Errorf("%s is not in kustomization.yaml", base)
		}
		if strings.Contains(filepath.Base(f), "secret") {
			t.Errorf("%s: a Secret example must not be in deployments/k8s", f)
		}
	}
	files = append(files, "../deployments/k8s-secret.example.yaml")
	objs := map[string]k8sObject{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var o k8sObject
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			objs[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	for _, name := range []string{"ConfigMap/retryd-config", "Secret/retryd-secrets"} {
		for k := range objs[name].Data {
			if !slices.Contains(config.Names, k) {
				t.Errorf("%s sets %s, which retryd does not read", name, k)
			}
		}
		for k := range objs[name].StringData {
			if !slices.Contains(config.Names, k) {
				t.Errorf("%s sets %s, which retryd does not read", name, k)
			}
		}
	}
	for _, c := range []struct {
		deployment, component string
		portEnv               string
		probes                []string
	}{
		{"Deployment/retryd-api", "api", "PORT", []string{"/healthz", "/readyz"}},
		{"Deployment/retryd-worker", "worker", "METRICS_ADDR", []string{"/healthz", "/readyz"}},
	} {
		d, ok := objs[c.deployment]
		if !ok || len(d.Spec.Template.Spec.Containers) != 1 {
			t.Fatalf("%s missing or not one container", c.deployment)
		}
		ct := d.Spec.Template.Spec.Containers[0]
		if !strings.Contains(ct.Image, c.component) {
			t.Errorf("%s runs image %q", c.deployment, ct.Image)
		}
		ports := map[string]int{}
		for _, p := range ct.Ports {
			ports[p.Name] = p.ContainerPort
		}
		env := map[string]string{}
		for _, e := range ct.Env {
			env[e.Name] = e.Value
			if !readEnv(e.Name) {
				t.Errorf("%s sets %s, which retryd does not read", c.deployment, e.Name)
			}
		}
		if c.component == "worker" && env["GOMAXPROCS"] != "1" {
			t.Errorf("%s GOMAXPROCS %q, want 1 (docs/benchmarks.md: one P per worker process)", c.deployment, env["GOMAXPROCS"])
		}
		want, _ := strconv.Atoi(strings.TrimPrefix(env[c.portEnv], ":"))
		found := false
		for _, p := range ports {
			found = found || p == want
		}
		if !found {
			t.Errorf("%s: %s=%q but container ports are %v", c.deployment, c.portEnv, env[c.portEnv], ports)
		}
		var paths []string
		for _, p := range []*probe{ct.LivenessProbe, ct.ReadinessProbe} {
			if p == nil {
				continue
			}
			paths = append(paths, p.HTTPGet.Path)
			if _, ok := ports[p.HTTPGet.Port]; !ok {
				t.Errorf("%s probe %s on undeclared port %q", c.deployment, p.HTTPGet.Path, p.HTTPGet.Port)
			}
		}
		if !slices.Equal(paths, c.probes) {
			t.Errorf("%s probes %v, want %v", c.deployment, paths, c.probes)
		}
	}
	if g := objs["Deployment/retryd-worker"].Spec.Template.Spec.TerminationGracePeriodSeconds; g <= int(app.WorkerShutdownTimeout.Seconds()) {
		t.Errorf("worker terminationGracePeriodSeconds %d, want more than asynq's %v shutdown timeout", g, app.WorkerShutdownTimeout)
	}
	if g := objs["Deployment/retryd-api"].Spec.Template.Spec.TerminationGracePeriodSeconds; g <= int(app.APIShutdownTimeout.Seconds()) {
		t.Errorf("api terminationGracePeriodSeconds %d, want more than the %v drain", g, app.APIShutdownTimeout)
	}
	if svc := objs["Service/retryd-api"]; len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != "http" {
		t.Errorf("Service/retryd-api does not target the api's http port: %+v", svc.Spec.Ports)
	}
	// The images are the user's own builds, named in kustomization.yaml
	// (images:), and the Secret is required: a forgotten one must not
	// start an API open to anyone.
	kustRaw, _ := os.ReadFile("../deployments/k8s/kustomization.yaml")
	for _, name := range []string{"retryd-api", "retryd-worker"} {
		if !strings.Contains(string(kustRaw), "- name: "+name+"\n") {
			t.Errorf("kustomization.yaml sets no image for %s", name)
		}
	}
	for _, f := range []string{"api.yaml", "worker.yaml"} {
		raw, _ := os.ReadFile("../deployments/k8s/" + f)
		if strings.Contains(string(raw), "optional: true") {
			t.Errorf("%s: the Secret is optional", f)
		}
	}
	// Hardened pods: non-root, read-only root filesystem, no privilege
	// escalation, no capabilities; pinned images.
	for _, name := range []string{"Deployment/retryd-api", "Deployment/retryd-worker", "StatefulSet/redis"} {
		o, ok := objs[name]
		if !ok {
			t.Errorf("%s is not rendered", name)
			continue
		}
		if !o.Spec.Template.Spec.SecurityContext.RunAsNonRoot {
			t.Errorf("%s: pod securityContext.runAsNonRoot is not true", name)
		}
		for _, ct := range o.Spec.Template.Spec.Containers {
			sc := ct.SecurityContext
			if !sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				t.Errorf("%s/%s: securityContext %+v", name, ct.Name, sc)
			}
			if strings.HasSuffix(ct.Image, ":latest") || !strings.Contains(ct.Image, ":") {
				t.Errorf("%s/%s: image %q is not pinned", name, ct.Name, ct.Image)
			}
		}
	}
	// A disruption budget per component.
	for _, component := range []string{"api", "worker"} {
		pdb := objs["PodDisruptionBudget/retryd-"+component]
		if pdb.Spec.Selector.MatchLabels["component"] != component || (pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil) {
			t.Errorf("no PodDisruptionBudget for the %s: %+v", component, pdb.Spec)
		}
	}
	// Prometheus scrapes the API and the workers with an admin key, on
	// ports the pods declare; no annotation invites a job without one.
	var scrape promConfig
	if err := yaml.Unmarshal([]byte(objs["ConfigMap/retryd-prometheus"].Data["retryd.yml"]), &scrape); err != nil {
		t.Fatalf("ConfigMap/retryd-prometheus retryd.yml: %v", err)
	}
	for _, c := range []struct{ component, port string }{{"api", "http"}, {"worker", "metrics"}} {
		job := scrape.job("retryd-" + c.component)
		if job == nil {
			t.Errorf("no scrape job retryd-%s: %+v", c.component, scrape)
			continue
		}
		if job.Authorization.CredentialsFile == "" {
			t.Errorf("scrape job %s sends no credentials: /metrics answers an admin key only", job.Name)
		}
		if len(job.KubernetesSD) != 1 || len(job.KubernetesSD[0].Selectors) != 1 || job.KubernetesSD[0].Selectors[0].Label != "app=retryd,component="+c.component {
			t.Errorf("scrape job %s does not select the %s pods: %+v", job.Name, c.component, job.KubernetesSD)
		}
		if len(job.Relabel) != 1 || job.Relabel[0].Regex != c.port || job.Relabel[0].Action != "keep" {
			t.Errorf("scrape job %s does not keep the %q port: %+v", job.Name, c.port, job.Relabel)
		}
		d := objs["Deployment/retryd-"+c.component]
		declared := false
		for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
			declared = declared || p.Name == c.port
		}
		if !declared {
			t.Errorf("scrape job %s keeps port %q, which the %s pods do not declare", job.Name, c.port, c.component)
		}
		if a := d.Spec.Template.Metadata.Annotations; a["prometheus.io/scrape"] == "true" {
			t.Errorf("%s pods ask the annotation job, which sends no key, to scrape them", c.component)
		}
	}
	if strings.Contains(objs["Secret/retryd-secrets"].StringData["ADMIN_KEYS"], ",") {
		t.Errorf("the example Secret's ADMIN_KEYS, Prometheus' credentials file, holds more than one key")
	}
	if svc := objs["Service/retryd-worker-metrics"]; len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort != "metrics" {
		t.Errorf("Service/retryd-worker-metrics: %+v", svc.Spec.Ports)
	}
	// Redis is part of the deployment, where REDIS_URL points.
	if _, ok := objs["Service/redis"]; !ok || !strings.HasPrefix(objs["ConfigMap/retryd-config"].Data["REDIS_URL"], "redis://redis:6379") {
		t.Errorf("REDIS_URL %q does not point at the redis Service", objs["ConfigMap/retryd-config"].Data["REDIS_URL"])
	}
	// The destination rules reach both programs from the one ConfigMap,
	// they open in-cluster destinations, and the programs accept them.
	cm := objs["ConfigMap/retryd-config"].Data
	for _, name := range config.DestinationRules {
		if _, ok := cm[name]; !ok {
			t.Errorf("ConfigMap/retryd-config does not set %s: the API and the workers read it, and in-cluster destinations need it", name)
		}
	}
	if cm["ALLOWED_CIDRS"] == "" && cm["ALLOW_PRIVATE_TARGETS"] != "true" {
		t.Error("ConfigMap/retryd-config opens no private range: every in-cluster destination would be refused")
	}
	if cfg, err := config.Load(func(k string) string { return cm[k] }); err != nil {
		t.Errorf("the programs refuse ConfigMap/retryd-config: %v", err)
	} else if len(cfg.AllowedCIDRs) == 0 && !cfg.AllowPrivateTargets {
		t.Errorf("ConfigMap/retryd-config as the programs read it opens no private range: %+v", cm)
	}
	for _, f := range []string{"api.yaml", "worker.yaml"} {
		raw, _ := os.ReadFile("../deployments/k8s/" + f)
		if !strings.Contains(string(raw), "configMapRef: {name: retryd-config}") {
			t.Errorf("%s does not read ConfigMap/retryd-config", f)
		}
	}
	// The StatefulSet's Redis runs deployments/redis.conf, line for line.
	rc, err := os.ReadFile("../deployments/redis.conf")
	if err != nil {
		t.Fatal(err)
	}
	if conf := objs["ConfigMap/retryd-redis-config"].Data["redis.conf"]; conf != string(rc) {
		t.Errorf("redis.conf of the StatefulSet is not deployments/redis.conf:\n%s", conf)
	}
}

// promConfig is what the tests read of a Prometheus configuration.
type promConfig struct {
	ScrapeConfigs []promJob `yaml:"scrape_configs"`
}

type promJob struct {
	Name          string `yaml:"job_name"`
	Authorization struct {
		CredentialsFile string `yaml:"credentials_file"`
	} `yaml:"authorization"`
	Static []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
	DNSSD []struct {
		Names []string `yaml:"names"`
		Port  int      `yaml:"port"`
	} `yaml:"dns_sd_configs"`
	KubernetesSD []struct {
		Selectors []struct {
			Label string `yaml:"label"`
		} `yaml:"selectors"`
	} `yaml:"kubernetes_sd_configs"`
	Relabel []struct {
		Regex  string `yaml:"regex"`
		Action string `yaml:"action"`
	} `yaml:"relabel_configs"`
}

func (c promConfig) job(name string) *promJob {
	for i := range c.ScrapeConfigs {
		if c.ScrapeConfigs[i].Name == name {
			return &c.ScrapeConfigs[i]
		}
	}
	return nil
}
