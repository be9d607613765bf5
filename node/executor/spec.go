package executor

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"path"
	"regexp"
	"sort"
	"strings"
)

// Spec is what the executor needs to know about a leased job: the renter's
// image and command, and the limits and GPUs the lease fixed.
type Spec struct {
	JobID    string // also names the container; [A-Za-z0-9_.-], at most 128
	LeaseCID string
	Image    string
	Command  []string // appended to the image's entrypoint, as `docker run IMAGE CMD...`
	Env      map[string]string
	Secrets  Secrets // passed as environment, never printed or logged
	// Provided are variables under the reserved GLEANER_ prefix that the
	// provider sets from the lease's spec (a job array's shard index and
	// count): the renter cannot set that prefix in Env, so the spec says
	// what and the provider writes it.
	Provided map[string]string
	// RegistryAuth are credentials for pulling Image from a private
	// registry; nil pulls anonymously. Like Secrets, never printed, logged
	// or put in an error (registryauth.go, which also says when a present
	// image is pulled again).
	RegistryAuth *RegistryAuth

	GPUUUIDs      []string
	SimulatedGPUs bool // no device request; the job sees GLEANER_SIMULATED_GPUS=1

	CPUs      float64 // required, > 0
	MemoryMiB int64   // required, > 0; swap is not granted on top
	Pids      int64   // required, > 0

	Egress    bool // the provider's policy allows network egress
	RunAsRoot bool // the spec requires uid 0 (still without capabilities)

	// ServicePort is the TCP port a service job listens on, which only
	// the provider's daemon reaches, on a network of the job's own with
	// no egress (service_net.go); 0 for a job that serves nothing. Not
	// with Egress.
	ServicePort int

	CheckpointPath string // absolute path in the container, or "" for none
	// Restore is a checkpoint tar (as CopyCheckpoint returns it) unpacked
	// into CheckpointPath before the job starts: how a preempted job
	// resumes on another provider.
	Restore []byte

	// Inputs are read-only file trees the job sees at their Targets,
	// filled before the job starts (inputs.go); at most MaxInputs.
	Inputs []Input

	// OutputPath is an absolute, clean path in the container where the
	// job writes its results, or "" for none; CopyOutputs returns what it
	// holds, while the job runs and after it exits (outputs.go). The job
	// finds it in EnvOutputs too.
	OutputPath string
	// OutputMiB bounds OutputPath, 0..MaxOutputMiB; 0 with OutputPath set
	// means DefaultOutputMiB. Unlike the quotas below, it does not come out
	// of MemoryMiB: the output volume is a tmpfs too, whose pages count
	// against the job's memory, so the executor raises the container's
	// memory limit by OutputMiB (outputs.go, "Memory", says why).
	OutputMiB int

	// Quotas, in MiB, of what the job can write (volume.go); each is a
	// tmpfs, so its contents count against MemoryMiB too. Zero means the
	// default.
	CheckpointMiB int // CheckpointPath; 0 means DefaultCheckpointMiB (64)
	ScratchMiB    int // /tmp; 0 means DefaultScratchMiB (64)
	ShmMiB        int // /dev/shm; 0 means DefaultShmMiB (64)
}

// Secrets are environment variables whose values must never appear in logs,
// errors or printed specs. The methods below make fmt and slog redact them,
// so that a Spec can be logged whole without thinking.
type Secrets map[string]string

// String lists the names only.
func (s Secrets) String() string {
	keys := sortedKeys(s)
	for i, k := range keys {
		keys[i] = k + "=<redacted>"
	}
	return "[" + strings.Join(keys, " ") + "]"
}

// GoString keeps %#v from printing the values.
func (s Secrets) GoString() string { return "executor.Secrets" + s.String() }

// LogValue keeps slog from printing the values.
func (s Secrets) LogValue() slog.Value { return slog.StringValue(s.String()) }

// MarshalJSON keeps encoding/json (and slog's JSON handler, which marshals
// a logged Spec) from writing the values.
func (s Secrets) MarshalJSON() ([]byte, error) { return json.Marshal(s.String()) }

var jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// validate rejects a spec that would run without the limits the lease fixed
// or in a way the executor cannot express; every error wraps ErrBadSpec.
func (s *Spec) validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrBadSpec}, a...)...)
	}
	switch {
	case !jobIDPattern.MatchString(s.JobID):
		return bad("job ID %q must match %s", s.JobID, jobIDPattern)
	case s.CPUs <= 0 || s.MemoryMiB <= 0 || s.Pids <= 0:
		return bad("CPU, memory and pids limits are required (got %v CPUs, %d MiB, %d pids)", s.CPUs, s.MemoryMiB, s.Pids)
	case s.ScratchMiB < 0 || s.ShmMiB < 0 || s.CheckpointMiB < 0:
		return bad("negative quota (scratch %d MiB, shm %d MiB, checkpoint %d MiB)", s.ScratchMiB, s.ShmMiB, s.CheckpointMiB)
	case s.CheckpointPath != "" && (!path.IsAbs(s.CheckpointPath) || path.Clean(s.CheckpointPath) == "/" || path.Clean(s.CheckpointPath) == "/tmp"):
		return bad("checkpoint path %q must be an absolute path other than / and /tmp", s.CheckpointPath)
	case s.SimulatedGPUs && len(s.GPUUUIDs) == 0:
		return bad("simulated GPUs without UUIDs")
	}
	if err := s.validateGPUs(bad); err != nil {
		return err
	}
	if err := s.validateInputs(bad); err != nil {
		return err
	}
	if err := s.validateOutputs(bad); err != nil {
		return err
	}
	if err := s.validateRegistryAuth(bad); err != nil {
		return err
	}
	if err := s.validateService(bad); err != nil {
		return err
	}
	for k := range s.Secrets {
		if _, dup := s.Env[k]; dup {
			return bad("%q is both an env var and a secret", k)
		}
		if err := checkEnvName(k); err != nil {
			return bad("secret: %v", err)
		}
	}
	for k := range s.Env {
		if err := checkEnvName(k); err != nil {
			return bad("env: %v", err)
		}
	}
	for k := range s.Provided {
		if !strings.HasPrefix(k, "GLEANER_") || strings.ContainsAny(k, "=\x00") || k == EnvJobID {
			return bad("provided env %q: want a GLEANER_ name the executor does not set itself", k)
		}
	}
	return nil
}

// checkEnvName reserves the GLEANER_ prefix: with duplicate names most
// programs read the first one, so a renter's GLEANER_SIMULATED_GPUS=0 could
// otherwise shadow the executor's.
func checkEnvName(k string) error {
	switch {
	case k == "" || strings.ContainsAny(k, "=\x00"):
		return fmt.Errorf("bad name %q", k)
	case strings.HasPrefix(k, "GLEANER_"):
		return fmt.Errorf("%q: the GLEANER_ prefix is reserved", k)
	}
	return nil
}

// environ is the job's environment as KEY=VALUE, sorted for a stable
// container config. checkpoint is where this executor put the checkpoint,
// inputs where it put each input (EnvInputPrefix), outputs where the job
// writes its results ("" for none).
func (s *Spec) environ(checkpoint string, inputs []string, outputs string) []string {
	env := make([]string, 0, len(s.Env)+len(s.Secrets)+len(s.Provided)+len(inputs)+5)
	for _, k := range sortedKeys(s.Env) {
		env = append(env, k+"="+s.Env[k])
	}
	for _, k := range sortedKeys(s.Secrets) {
		env = append(env, k+"="+s.Secrets[k])
	}
	for _, k := range sortedKeys(s.Provided) {
		env = append(env, k+"="+s.Provided[k])
	}
	env = append(env, EnvJobID+"="+s.JobID)
	if len(s.GPUUUIDs) > 0 {
		env = append(env, EnvGPUUUIDs+"="+strings.Join(s.GPUUUIDs, ","))
	}
	if s.SimulatedGPUs {
		env = append(env, EnvSimulatedGPUs+"=1")
	}
	if checkpoint != "" {
		env = append(env, EnvCheckpointPath+"="+checkpoint)
	}
	env = append(env, inputEnv(inputs)...)
	if outputs != "" {
		env = append(env, EnvOutputs+"="+outputs)
	}
	return env
}

// labels mark what the executor creates for s on o's behalf.
func (s *Spec) labels(o Owner) map[string]string {
	return map[string]string{
		LabelManaged: "1", LabelJob: s.JobID, LabelLease: s.LeaseCID,
		LabelNode: o.Node, LabelInstance: o.Instance,
	}
}

func (s *Spec) scratchMiB() int    { return orDefault(s.ScratchMiB, DefaultScratchMiB) }
func (s *Spec) shmMiB() int        { return orDefault(s.ShmMiB, DefaultShmMiB) }
func (s *Spec) checkpointMiB() int { return orDefault(s.CheckpointMiB, DefaultCheckpointMiB) }

func orDefault(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

func sortedKeys[M ~map[string]string](m M) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
