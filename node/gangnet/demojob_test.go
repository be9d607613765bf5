package gangnet

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The test image's workload itself (testnet/demojob -gang), run as the
// process executor runs a job: a process whose only knowledge of its gang
// is the GLEANER_GANG_* environment Membership.Env gives it. Two members
// exchange through their providers' forwards and both exit 0.
func TestGangDemojobProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("builds testnet/demojob")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "demojob")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/gleaner-net/gleaner/testnet/demojob")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build demojob: %v\n%s", err, out)
	}
	rig := newGangRig(t, ctx, "demo", 2, testLimits())
	var wg sync.WaitGroup
	outs := make([][]byte, 2)
	errs := make([]error, 2)
	for i, p := range rig.provs {
		// The job listens on its own entry's port, as a container on its
		// own network would: a free port, found by closing a listener.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr).AddrPort()
		ln.Close()
		m, err := p.net.Join(Local{Roster: rig.roster, Rank: i, Lease: leaseOf(i), ListenIP: loopback, Self: addr,
			Container: At(netip.AddrPortFrom(loopback, addr.Port()))})
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, bin, "-gang", "60s")
		cmd.Env = os.Environ()
		for k, v := range m.Env() {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		wg.Add(1)
		go func() { defer wg.Done(); outs[i], errs[i] = cmd.CombinedOutput() }()
	}
	wg.Wait()
	for i := range 2 {
		want := fmt.Sprintf("gang rank %d: reached all 2 ranks and heard from all", i)
		if errs[i] != nil || !strings.Contains(string(outs[i]), want) {
			t.Errorf("rank %d: %v\n%s", i, errs[i], outs[i])
		}
	}
}
