package gangnet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/testnet/gangcheck"
)

// The test image's gang mode (demojob -gang, testnet/gangcheck) passes
// through the forwards: three members, each configured from nothing but
// its Env, reach every rank and hear from every rank, with payloads that
// differ per pair so that a connection delivered to the wrong rank fails.
// Rank 2's container "starts" late: its provider refuses streams as
// unreachable until then, and the others retry, as a rendezvous does.
func TestGangCheckThroughForwards(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rig := newGangRig(t, ctx, "check", 3, testLimits())
	var wg sync.WaitGroup
	outs := make([]bytes.Buffer, 3)
	errs := make([]error, 3)
	for i, p := range rig.provs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().(*net.TCPAddr).AddrPort()
		container := At(addr)
		if i == 2 {
			up := time.Now().Add(time.Second)
			container = func(context.Context) (netip.AddrPort, error) {
				if time.Now().Before(up) {
					return netip.AddrPort{}, errors.New("container not started")
				}
				return addr, nil
			}
		}
		m, err := p.net.Join(Local{Roster: rig.roster, Rank: i, Lease: leaseOf(i), ListenIP: loopback, Self: addr, Container: container})
		if err != nil {
			t.Fatal(err)
		}
		env := m.Env()
		cfg, err := gangcheck.FromEnv(func(k string) string { return env[k] }, &outs[i])
		if err != nil {
			t.Fatal(err)
		}
		cfg.Listen = ln
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = gangcheck.Run(ctx, cfg) }()
	}
	wg.Wait()
	if st := rig.provs[2].net.Stats(); st.Refused == 0 {
		t.Errorf("rank 2's provider refused nothing before its container started: %+v", st)
	}
	for i, err := range errs {
		if err != nil {
			t.Errorf("rank %d: %v\n%s", i, err, outs[i].String())
		}
		if want := fmt.Sprintf("gang rank %d: reached all 3 ranks and heard from all", i); !strings.Contains(outs[i].String(), want) {
			t.Errorf("rank %d printed %q, want %q", i, outs[i].String(), want)
		}
	}
}
