package testnet

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// The systemd unit, the compose files and the DaemonSet of deploy/,
// checked by the tools Debian packages (see deploy_image_test.go for the
// image).

// TestSystemdUnitVerifies runs systemd-analyze verify on deploy/
// gleaner.service; any line it prints about the unit fails the test.
// verify checks that ExecStart's program is executable, so the copy it
// reads points at this test's own binary instead of /usr/local/bin/gleaner.
func TestSystemdUnitVerifies(t *testing.T) {
	tool, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatalf("systemd-analyze is missing (apt-get install systemd): %v", err)
	}
	unit, err := os.ReadFile(filepath.Join(deployDir, "gleaner.service"))
	if err != nil {
		t.Fatal(err)
	}
	const exe = "ExecStart=/usr/local/bin/gleaner daemon --init"
	if !bytes.Contains(unit, []byte(exe)) {
		t.Fatalf("deploy/gleaner.service has no %q line", exe)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "gleaner.service")
	if err := os.WriteFile(path, bytes.Replace(unit, []byte(exe), []byte("ExecStart="+self+" daemon --init"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(tool, "verify", path).CombinedOutput()
	if err != nil || bytes.Contains(out, []byte("gleaner.service")) {
		t.Fatalf("systemd-analyze verify deploy/gleaner.service: %v\n%s", err, out)
	}
}

// TestComposeFilesValidate runs `docker-compose config` on both compose
// files and checks what the provider's must carry after interpolation.
func TestComposeFilesValidate(t *testing.T) {
	tool, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatalf("docker-compose is missing (apt-get install docker-compose): %v", err)
	}
	compose := func(file string, env ...string) ([]byte, error) {
		cmd := exec.Command(tool, "-f", filepath.Join(deployDir, file), "config")
		cmd.Env = append(os.Environ(), env...)
		return cmd.CombinedOutput()
	}
	if out, err := compose("compose.bootstrap.yaml"); err != nil || !bytes.Contains(out, []byte("--relay")) {
		t.Fatalf("docker-compose config on compose.bootstrap.yaml (want --relay nodes): %v\n%s", err, out)
	}
	// Without the socket's group the provider's file must refuse, by name.
	if out, err := compose("compose.provider.yaml", "DOCKER_GID="); err == nil || !bytes.Contains(out, []byte("DOCKER_GID")) {
		t.Fatalf("compose.provider.yaml without DOCKER_GID: want an error naming it, got %v\n%s", err, out)
	}
	out, err := compose("compose.provider.yaml", "DOCKER_GID=4242")
	if err != nil {
		t.Fatalf("docker-compose config on compose.provider.yaml: %v\n%s", err, out)
	}
	var cfg struct {
		Services map[string]struct {
			GroupAdd []any `yaml:"group_add"`
			Volumes  []any `yaml:"volumes"`
			Deploy   struct {
				Resources struct {
					Reservations struct {
						Devices []struct {
							Driver       string   `yaml:"driver"`
							Capabilities []string `yaml:"capabilities"`
						} `yaml:"devices"`
					} `yaml:"reservations"`
				} `yaml:"resources"`
			} `yaml:"deploy"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(out, &cfg); err != nil {
		t.Fatalf("docker-compose config's output: %v", err)
	}
	node, ok := cfg.Services["node"]
	if !ok {
		t.Fatalf("compose.provider.yaml has no service \"node\":\n%s", out)
	}
	if fmt.Sprint(node.GroupAdd) != "[4242]" || !strings.Contains(fmt.Sprint(node.Volumes), "/var/run/docker.sock") {
		t.Errorf("the node service must mount the Docker socket and join DOCKER_GID; group_add %v, volumes %v", node.GroupAdd, node.Volumes)
	}
	devs := node.Deploy.Resources.Reservations.Devices
	if len(devs) != 1 || devs[0].Driver != "nvidia" || !strings.Contains(fmt.Sprint(devs[0].Capabilities), "utility") {
		t.Errorf("the node service must reserve the nvidia driver's GPUs with the utility (NVML) capability; got %+v", devs)
	}
}

// k8sDoc is what TestKubernetesDaemonSetConventions reads of a manifest.
type k8sDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec k8sPod `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type k8sPod struct {
	ServiceAccountName string            `yaml:"serviceAccountName"`
	NodeSelector       map[string]string `yaml:"nodeSelector"`
	RuntimeClassName   string            `yaml:"runtimeClassName"`
	Tolerations        []struct {
		Key, Operator, Effect string
	} `yaml:"tolerations"`
	SecurityContext struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    int   `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	Containers []struct {
		Name      string `yaml:"name"`
		Resources struct {
			Limits map[string]string `yaml:"limits"`
		} `yaml:"resources"`
		SecurityContext struct {
			RunAsNonRoot             *bool `yaml:"runAsNonRoot"`
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	} `yaml:"containers"`
	Volumes []struct {
		Name     string `yaml:"name"`
		HostPath *struct {
			Path, Type string
		} `yaml:"hostPath"`
	} `yaml:"volumes"`
}

// TestKubernetesDaemonSetConventions parses deploy/kubernetes/daemonset.yaml
// and holds it to the device plugin's conventions: GPU nodes only (label
// and taint), the nvidia runtime class, GPUs reserved, non-root, and the
// repo and Docker socket from the host. No offline schema validator is
// packaged for Debian (kubectl needs a server), so this is the check.
func TestKubernetesDaemonSetConventions(t *testing.T) {
	f, err := os.Open(filepath.Join(deployDir, "kubernetes", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	kinds := map[string]k8sDoc{}
	for dec := yaml.NewDecoder(f); ; {
		var d k8sDoc
		if err := dec.Decode(&d); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("daemonset.yaml: %v", err)
		}
		kinds[d.Kind] = d
	}
	ns, ds := kinds["Namespace"].Metadata.Name, kinds["DaemonSet"]
	if ns == "" || ds.Metadata.Namespace != ns || kinds["ServiceAccount"].Metadata.Namespace != ns {
		t.Fatalf("want a Namespace, and the ServiceAccount and DaemonSet in it; got %v", kinds)
	}
	sel, labels := ds.Spec.Selector.MatchLabels, ds.Spec.Template.Metadata.Labels
	if len(sel) == 0 {
		t.Fatal("the DaemonSet's selector has no matchLabels")
	}
	for k, v := range sel {
		if labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod template's labels %v", k, v, labels)
		}
	}
	pod := ds.Spec.Template.Spec
	if pod.ServiceAccountName != kinds["ServiceAccount"].Metadata.Name {
		t.Errorf("the pod runs as ServiceAccount %q, not the one the file makes", pod.ServiceAccountName)
	}
	if pod.NodeSelector["nvidia.com/gpu.present"] != "true" || pod.RuntimeClassName != "nvidia" {
		t.Errorf("want nodeSelector nvidia.com/gpu.present=\"true\" and runtimeClassName nvidia; got %v, %q", pod.NodeSelector, pod.RuntimeClassName)
	}
	tolerated := false
	for _, tl := range pod.Tolerations {
		tolerated = tolerated || tl.Key == "nvidia.com/gpu" && tl.Operator == "Exists"
	}
	if !tolerated {
		t.Errorf("no toleration for the nvidia.com/gpu taint: %+v", pod.Tolerations)
	}
	if p := pod.SecurityContext; p.RunAsNonRoot == nil || !*p.RunAsNonRoot || p.RunAsUser != 65532 {
		t.Errorf("the pod must run as non-root uid 65532 (the image's USER); got %+v", p)
	}
	if len(pod.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Resources.Limits["nvidia.com/gpu"] == "" {
		t.Errorf("container %s has no nvidia.com/gpu limit: %v", c.Name, c.Resources.Limits)
	}
	if sc := c.SecurityContext; sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container %s must forbid privilege escalation and keep its root read-only", c.Name)
	}
	hostPaths := map[string]string{}
	for _, v := range pod.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounted := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounted[hostPaths[m.Name]] = m.MountPath
	}
	for host, want := range map[string]string{"/var/lib/gleaner": "/var/lib/gleaner", "/var/run/docker.sock": "/var/run/docker.sock"} {
		if mounted[host] != want {
			t.Errorf("hostPath %s must be mounted at %s; mounts by host path: %v", host, want, mounted)
		}
	}
}
