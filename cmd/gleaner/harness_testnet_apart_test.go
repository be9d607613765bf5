package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// runningTestnet is a `gleaner testnet up --json` child and what it printed.
type runningTestnet struct {
	Network   string   `json:"network"`
	Workloads []string `json:"workloads"`
	Nodes     []struct {
		PeerID string `json:"peer_id"`
		Repo   string `json:"repo"`
	} `json:"nodes"`
	Peers []int `json:"peers"`
}

// startTestnet starts `testnet up --nodes 2 --providers 1` with extra
// flags and returns what it printed once its nodes meshed. Cleanup stops
// it with Ctrl-C and waits for it.
func startTestnet(t *testing.T, extra ...string) runningTestnet {
	t.Helper()
	args := append([]string{"testnet", "up", "--nodes", "2", "--providers", "1", "--dir", t.TempDir(), "--run-for", "2m", "--json"}, extra...)
	cmd := exec.Command(binPath, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGINT)
		kill := time.AfterFunc(30*time.Second, func() { _ = cmd.Process.Kill() })
		defer kill.Stop()
		<-done
	})
	var tn runningTestnet
	decoded := make(chan error, 1)
	go func() {
		decoded <- json.NewDecoder(stdout).Decode(&tn)
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case err := <-decoded:
		if err != nil {
			<-done
			t.Fatalf("testnet up --json: %v\nstderr: %s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("testnet up printed no JSON in 60 s\nstderr: %s", stderr.String())
	}
	return tn
}

// marketProviders polls the node's market until it holds want offers (or
// 20 s pass) and returns the providers of the offers matching query.
func marketProviders(t *testing.T, repo, query string, want int) []string {
	t.Helper()
	var res struct {
		Offers []struct {
			Provider string `json:"provider"`
		} `json:"offers"`
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		r := gleaner(t, "--repo", repo, "market", "offers", query, "--json")
		mustOK(t, r, "market offers")
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("market offers --json: %v\n%s", err, r.stdout)
		}
		if len(res.Offers) >= want || time.Now().After(deadline) {
			break
		}
	}
	var ids []string
	for _, o := range res.Offers {
		ids = append(ids, o.Provider)
	}
	return ids
}

// TestTwoTestnetsOnOneHostStayApart runs two `testnet up` at once: each
// gets a private network of its own, its nodes see only each other and
// its market only its own provider; --workloads reaches the offers.
func TestTwoTestnetsOnOneHostStayApart(t *testing.T) {
	// Both run at once: b starts while a is up.
	a := startTestnet(t, "--workloads", "batch,service")
	b := startTestnet(t, "--workloads", "batch")
	if !strings.HasPrefix(a.Network, "tn-") || !strings.HasPrefix(b.Network, "tn-") || a.Network == b.Network {
		t.Fatalf("networks %q and %q: want two different tn-XXXXXX names", a.Network, b.Network)
	}
	for _, tc := range []struct {
		name        string
		own, other  runningTestnet
		wantService bool
	}{{"A", a, b, true}, {"B", b, a, false}} {
		prov, renter := tc.own.Nodes[0], tc.own.Nodes[1]
		others := []string{tc.other.Nodes[0].PeerID, tc.other.Nodes[1].PeerID}
		// The renter's book holds its own provider's offer, and no other.
		got := marketProviders(t, renter.Repo, "", 1)
		if !slices.Equal(got, []string{prov.PeerID}) {
			t.Errorf("testnet %s: market offers from %v, want only its provider %s (other testnet: %v)", tc.name, got, prov.PeerID, others)
		}
		r := gleaner(t, "--repo", renter.Repo, "peers", "--json")
		mustOK(t, r, "peers")
		var peers []struct {
			PeerID string `json:"peer_id"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &peers); err != nil {
			t.Fatalf("peers --json: %v\n%s", err, r.stdout)
		}
		if !containsPeer(peers, prov.PeerID) || containsPeer(peers, others[0]) || containsPeer(peers, others[1]) {
			t.Errorf("testnet %s: renter's peers %s; want its provider %s and neither of %v", tc.name, r.stdout, prov.PeerID, others)
		}
		// --workloads is the provider's offer policy, as offer show and
		// the market's workload field see it.
		r = gleaner(t, "--repo", prov.Repo, "offer", "show", "--json")
		mustOK(t, r, "offer show")
		var show struct {
			Offer struct {
				Policy struct {
					Workloads []string `json:"workloads"`
				} `json:"policy"`
			} `json:"offer"`
		}
		if err := json.Unmarshal([]byte(r.stdout), &show); err != nil {
			t.Fatalf("offer show --json: %v\n%s", err, r.stdout)
		}
		if slices.Contains(show.Offer.Policy.Workloads, "service") != tc.wantService || !slices.Contains(show.Offer.Policy.Workloads, "batch") {
			t.Errorf("testnet %s: offer workloads %v, want service allowed: %t", tc.name, show.Offer.Policy.Workloads, tc.wantService)
		}
		if got := marketProviders(t, renter.Repo, "workload=service", 0); (len(got) == 1) != tc.wantService {
			t.Errorf("testnet %s: offers allowing services %v, want %t", tc.name, got, tc.wantService)
		}
	}
}
