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
		Template struct {
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
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
					LivenessProbe  *probe `yaml:"livenessProbe"`
					ReadinessProbe *probe `yaml:"readinessProbe"`
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
	files, _ := filepath.Glob("../deployments/k8s/*.yaml")
	if len(files) == 0 {
		t.Fatal("no manifests in deployments/k8s")
	}
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
		{"Deployment/retryd-worker", "worker", "METRICS_ADDR", []string{"/healthz"}},
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
			if !slices.Contains(config.Names, e.Name) {
				t.Errorf("%s sets %s, which retryd does not read", c.deployment, e.Name)
			}
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
}
