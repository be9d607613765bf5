package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// offer clear-fault against a real daemon: a GPU that is not faulted and
// an index the node does not have are errors (exit 1) naming why, with a
// hint; --json carries the RPC code; a missing --gpu is a usage error.
// (Clearing a real fault is proven in node's TestTheGPUMonitorKnowsThe
// JobsProcessesFromTheOwners, whose fake GPU source can raise one.)
func TestOfferClearFaultErrorsFromTheCLI(t *testing.T) {
	prov := initRepo(t)
	startDaemon(t, prov, "--simulate-gpus", "2xRTX4090")

	r := gleaner(t, "--repo", prov, "offer", "clear-fault", "--gpu", "1")
	if r.code != 1 || !strings.Contains(r.stderr, "GPU 1 is not faulted") || !strings.Contains(r.stderr, "hint: only a GPU") {
		t.Fatalf("a sound GPU: exit %d, stderr %q", r.code, r.stderr)
	}
	r = gleaner(t, "--repo", prov, "offer", "clear-fault", "--gpu", "7", "--json")
	var out struct {
		Error struct {
			Message string `json:"message"`
			RPCCode int    `json:"rpc_code"`
		} `json:"error"`
	}
	err := json.Unmarshal([]byte(r.stdout+r.stderr), &out)
	if f := out.Error; err != nil || r.code != 1 || f.RPCCode != -32050 || !strings.Contains(f.Message, "no GPU 7") {
		t.Fatalf("an unknown GPU with --json: exit %d, %+v (%v), output %q %q", r.code, out, err, r.stdout, r.stderr)
	}
	r = gleaner(t, "--repo", prov, "offer", "clear-fault")
	if r.code != 2 || !strings.Contains(r.stderr, "--gpu N is required") {
		t.Fatalf("no --gpu: exit %d, stderr %q; want a usage error", r.code, r.stderr)
	}
}
