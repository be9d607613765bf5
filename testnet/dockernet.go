package testnet

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// DockerNet is a gleaner network in Docker: one `gleaner daemon` per
// container, on private bridge networks that the engine isolates from each
// other, so that a test can cut a real link (take a container off a
// network) and heal it. The image is built FROM scratch from this checkout
// (static gleaner, the demo workload at /demojob, an empty /tmp for the
// process executor's work directories): nothing is pulled. Inside a
// container there is no Docker, so on the local network a provider runs
// jobs with the process executor.
//
// Every container, network and the image carry one random prefix; Close
// removes them all.
type DockerNet struct {
	Prefix string
	image  string
	label  string

	mu      sync.Mutex // guards nets, nodes and volumes
	nets    []string
	nodes   []*DockerNode
	volumes []string // what the removed containers had mounted (see Leftovers)
}

// DockerNode is one daemon in its container.
type DockerNode struct {
	Name   string // the container's name
	PeerID string
	Addr   string // /ip4/<address on its home network>/tcp/4030/p2p/<id>
	Net    string // its home network, the one it was started on
}

// DockerNetOptions configure NewDockerNet.
type DockerNetOptions struct {
	// Files are written into the image, by absolute path (a job spec,
	// say): the image has no shell to write them later.
	Files map[string]string
}

// dockerP2PPort is where every daemon listens, on every network it is on.
const dockerP2PPort = 4030

// NewDockerNet builds the image from the module at moduleRoot. Nodes and
// networks are added with AddNetwork and Start.
func NewDockerNet(ctx context.Context, moduleRoot string, opts DockerNetOptions) (*DockerNet, error) {
	var r [4]byte
	_, _ = rand.Read(r[:])
	prefix := "gdn-" + hex.EncodeToString(r[:])
	d := &DockerNet{Prefix: prefix, image: "gleaner-dockernet:" + prefix, label: "net.gleaner.dockernet=" + prefix}
	dir, err := os.MkdirTemp("", prefix+"-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	for _, b := range []struct{ out, pkg string }{{"gleaner", "./cmd/gleaner"}, {"demojob", "./testnet/demojob"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", filepath.Join(dir, b.out), b.pkg)
		cmd.Dir = moduleRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("build %s: %v: %s", b.pkg, err, out)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "tmp"), 0o755); err != nil {
		return nil, err
	}
	if err := os.Chmod(filepath.Join(dir, "tmp"), 0o1777); err != nil {
		return nil, err
	}
	df := "FROM scratch\nCOPY gleaner /gleaner\nCOPY demojob /demojob\nCOPY tmp /tmp\n"
	i := 0
	for path, content := range opts.Files {
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("dockernet: file %q: want an absolute path", path)
		}
		name := fmt.Sprintf("file%d", i)
		i++
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return nil, err
		}
		df += fmt.Sprintf("COPY %s %s\n", name, path)
	}
	// The CLI finds the daemon through the repo; GLEANER_REPO spares every
	// command a --repo flag.
	df += "ENV GLEANER_REPO=/repo\nENTRYPOINT [\"/gleaner\"]\n"
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		return nil, err
	}
	if _, err := docker(ctx, "build", "-q", "--label", d.label, "-t", d.image, dir); err != nil {
		return nil, err
	}
	return d, nil
}

// docker runs one docker command and returns its stdout; an error carries
// stderr.
func docker(ctx context.Context, args ...string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.Bytes(), fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.Bytes(), nil
}

// AddNetwork creates an internal bridge network (no route out of the host,
// none to any other network) and returns its full name.
func (d *DockerNet) AddNetwork(ctx context.Context, name string) (string, error) {
	full := d.Prefix + "-" + name
	if _, err := docker(ctx, "network", "create", "--internal", "--label", d.label, full); err != nil {
		return "", err
	}
	d.mu.Lock()
	d.nets = append(d.nets, full)
	d.mu.Unlock()
	return full, nil
}

// Start runs a daemon on the local network in a new container on network,
// with its repo created at start-up, mDNS off (peers are connected
// explicitly) and RPC on the container's loopback; extra are more daemon
// flags (--simulate-gpus, say). It returns once the daemon answers RPC.
func (d *DockerNet) Start(ctx context.Context, name, network string, extra ...string) (*DockerNode, error) {
	n := &DockerNode{Name: d.Prefix + "-" + name}
	args := []string{"run", "-d", "--name", n.Name, "--hostname", name, "--network", network, "--label", d.label, d.image,
		"daemon", "--init", "--network", "local", "--mdns=false",
		"--listen", fmt.Sprintf("/ip4/0.0.0.0/tcp/%d", dockerP2PPort), "--rpc", "127.0.0.1:4031"}
	args = append(args, extra...)
	d.mu.Lock()
	d.nodes = append(d.nodes, n) // removed by Close even if it never got ready
	d.mu.Unlock()
	if _, err := docker(ctx, args...); err != nil {
		return nil, err
	}
	n.Net = network
	if err := d.waitReady(ctx, n); err != nil {
		return nil, err
	}
	return n, nil
}

// waitReady waits up to 30 s for n's daemon to answer RPC, then notes its
// peer ID and its address on its home network (which a restart may change).
func (d *DockerNet) waitReady(ctx context.Context, n *DockerNode) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var id struct {
			PeerID string `json:"peer_id"`
		}
		err := d.Call(ctx, n, &id, "id")
		if err == nil {
			n.PeerID = id.PeerID
			break
		}
		if state, _ := docker(ctx, "inspect", "-f", "{{.State.Status}}", n.Name); strings.TrimSpace(string(state)) == "exited" {
			return fmt.Errorf("%s exited:\n%s", n.Name, d.Logs(n, 20))
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("%s not ready after 30 s: %v\n%s", n.Name, err, d.Logs(n, 20))
		}
		time.Sleep(100 * time.Millisecond)
	}
	ip, err := d.IP(ctx, n, n.Net)
	if err != nil {
		return err
	}
	n.Addr = fmt.Sprintf("/ip4/%s/tcp/%d/p2p/%s", ip, dockerP2PPort, n.PeerID)
	return nil
}

// IP is n's address on network.
func (d *DockerNet) IP(ctx context.Context, n *DockerNode, network string) (string, error) {
	out, err := docker(ctx, "inspect", "-f", fmt.Sprintf("{{with index .NetworkSettings.Networks %q}}{{.IPAddress}}{{end}}", network), n.Name)
	ip := strings.TrimSpace(string(out))
	if err == nil && ip == "" {
		err = fmt.Errorf("%s has no address on %s", n.Name, network)
	}
	return ip, err
}

// Gleaner runs a gleaner command in n's container (docker exec) and returns
// its stdout; an error carries stderr, where the CLI explains itself.
func (d *DockerNet) Gleaner(ctx context.Context, n *DockerNode, args ...string) ([]byte, error) {
	return docker(ctx, append([]string{"exec", n.Name, "/gleaner"}, args...)...)
}

// Call runs a gleaner command with --json and decodes its output into out.
func (d *DockerNet) Call(ctx context.Context, n *DockerNode, out any, args ...string) error {
	b, err := d.Gleaner(ctx, n, append(args, "--json")...)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("gleaner %s on %s: %v: %s", strings.Join(args, " "), n.Name, err, b)
	}
	return nil
}

// Connect has from dial to's address.
func (d *DockerNet) Connect(ctx context.Context, from, to *DockerNode) error {
	_, err := d.Gleaner(ctx, from, "connect", to.Addr)
	return err
}

// Attach puts n on network as well: a cable plugged in.
func (d *DockerNet) Attach(ctx context.Context, n *DockerNode, network string) error {
	_, err := docker(ctx, "network", "connect", network, n.Name)
	return err
}

// Detach takes n off network: the cable pulled.
func (d *DockerNet) Detach(ctx context.Context, n *DockerNode, network string) error {
	_, err := docker(ctx, "network", "disconnect", network, n.Name)
	return err
}

// Logs is the end of n's daemon log (stderr and stdout).
func (d *DockerNet) Logs(n *DockerNode, lines int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "logs", "--tail", fmt.Sprint(lines), n.Name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("(docker logs %s: %v: %s)", n.Name, err, out)
	}
	return string(out)
}

// Close removes every container, network and the image, with its own
// deadline so that it also runs after the caller's context has ended.
func (d *DockerNet) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d.mu.Lock()
	defer d.mu.Unlock()
	var errs []error
	if len(d.nodes) > 0 {
		args := []string{"rm", "-f", "-v"}
		for _, n := range d.nodes {
			args = append(args, n.Name)
		}
		d.volumes = append(d.volumes, mountedVolumes(ctx, args[3:])...)
		if out, err := docker(ctx, args...); err != nil && !strings.Contains(err.Error(), "No such container") {
			errs = append(errs, fmt.Errorf("%v %s", err, out))
		}
		d.nodes = nil
	}
	for _, net := range d.nets {
		if err := removeNetwork(ctx, net); err != nil {
			errs = append(errs, err)
		}
	}
	d.nets = nil
	if _, err := docker(ctx, "image", "rm", "-f", d.image); err != nil && !strings.Contains(err.Error(), "No such image") {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
