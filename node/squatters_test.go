package node

import (
	"context"
	"crypto/rand"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
	"github.com/libp2p/go-libp2p/core/crypto"
	ma "github.com/multiformats/go-multiaddr"
)

// Throwaway identities holding the GPUs (issue 31): an attacker that makes
// a fresh key every few seconds, quotes, awards and never starts held a
// provider's only GPU, one start deadline after another, and every honest
// job meanwhile ended no-match. Now a newcomer's unstarted award is
// displaced once its grace has passed, and at once by a renter that has
// paid the provider (auction/provider/newcomer.go).

// squatSpec is the attacker's job: silver, which no tier preempts.
var squatSpec = linesSpec("squat", "1s", 1)

// squatter is the attack on prov: every 2 to 4 s, from a fresh identity,
// a quote and an award, never started.
type squatter struct {
	prov *Node
	mu   sync.Mutex
	held []string // the attacker's awards the provider co-signed, by job ID
	n    int      // attempts
}

// run attacks until ctx ends.
func (q *squatter) run(ctx context.Context) {
	for {
		q.once(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(2*time.Second + mrand.N(2*time.Second)):
		}
	}
}

// awards is how many of the attacker's awards were co-signed so far.
func (q *squatter) awards() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.held...)
}

// once makes an identity, quotes and awards; the host is closed after,
// as the attacker has no use for it.
func (q *squatter) once(ctx context.Context) {
	q.mu.Lock()
	q.n++
	job := fmt.Sprintf("squat-%d", q.n)
	q.mu.Unlock()
	key, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		return
	}
	h, err := p2p.New(ctx, p2p.Identity(key), p2p.Network(repo.NetworkLocal), p2p.DisableNATServices(), p2p.Logger(quietLog),
		p2p.ListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), p2p.DHTMode("client"), p2p.DiscoveryInterval(0))
	if err != nil {
		return
	}
	defer h.Close()
	if h.Connect(ctx, addrInfo(q.prov.Host())) != nil {
		return
	}
	var qr wire.QuoteReply
	if squatExchange(ctx, h, q.prov, wire.QuoteProto, wire.QuoteRequest{JobID: job, Nonce: randomNonce(), Spec: []byte(squatSpec)}, &qr) != nil || qr.Decline != "" {
		return
	}
	b, _, err := auction.DecodeSignedBid(qr.Bid, time.Now())
	if err != nil {
		return
	}
	l := &auction.Lease{JobID: job, Network: repo.NetworkLocal, Renter: h.ID().String(), Provider: b.Provider,
		Tier: b.Tier, Price: b.Price, GPUs: b.GPUs, Start: b.Start, End: b.Start + b.DurationSec,
		NoticeSec: b.NoticeSec, BillingSec: 300, Bid: qr.Bid, GPUUUIDHash: b.GPUHashes, SpecHash: b.SpecHash}
	sl, err := auction.ProposeLease(l, key)
	if err != nil {
		return
	}
	prop, err := sl.Marshal()
	if err != nil {
		return
	}
	var ar wire.AwardReply
	if squatExchange(ctx, h, q.prov, wire.AwardProto, wire.AwardRequest{Lease: prop}, &ar) == nil && ar.Refused == "" && len(ar.Lease) > 0 {
		q.mu.Lock()
		q.held = append(q.held, job)
		q.mu.Unlock()
	}
}

func squatExchange(ctx context.Context, h *p2p.Host, prov *Node, proto string, req, rep any) error {
	s, err := h.LibP2P().NewStream(ctx, prov.Host().ID(), h.ProtocolID(proto))
	if err != nil {
		return err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(15 * time.Second))
	if err := wire.Write(s, req); err != nil {
		return err
	}
	return wire.Read(s, wire.MaxEventFrame, rep)
}

// honestRun submits spec on rn and waits up to limit for it to run:
// whether it did, and how long after the submission it first ran.
func honestRun(t testing.TB, rn *Node, spec string, limit time.Duration) (ran bool, after time.Duration, final *renting.JobRecord) {
	t.Helper()
	submitted := time.Now()
	j, err := rn.renterJobs.Submit([]byte(spec), nil, renting.SubmitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := submitted.Add(limit); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if final, err = rn.renterJobs.Get(j.ID); err != nil {
			t.Fatal(err)
		}
		switch final.State {
		case renting.StateRunning, renting.StateCompleted:
			return true, time.Since(submitted), final
		}
		if renting.Terminal(final.State) {
			return false, 0, final
		}
	}
	return false, 0, final
}

// establish has rn run one short job on prov to its end, paying for it:
// from then on prov counts rn as a renter with a paying history.
func establish(t testing.TB, prov, rn *Node) {
	t.Helper()
	ran, _, j := honestRun(t, rn, linesSpec(fmt.Sprintf("pays-%d", mrand.Int()), "2s", 2), time.Minute)
	if !ran {
		t.Fatalf("the paying job did not run: %s (%s)", j.State, j.Error)
	}
	renter := rn.Host().ID().String()
	waitFor(t, 30*time.Second, "the renter established with the provider", func() bool {
		return prov.providerJobs.Established(renter)
	})
	waitFor(t, 30*time.Second, "the paying job to end", func() bool {
		j, err := rn.renterJobs.Get(j.ID)
		return err == nil && renting.Terminal(j.State)
	})
}

// squatted starts a provider with one GPU, a renter that has paid it, and
// the rotating attacker, which stop (or the test's end) stops.
func squatted(tb testing.TB, ctx context.Context) (prov, paid *Node, q *squatter, stop func()) {
	prov = startSellerWith(tb, ctx, Options{}, nil)
	paid = renterOf(tb, ctx, prov)
	establish(tb, prov, paid)
	actx, stop := context.WithCancel(ctx)
	tb.Cleanup(stop)
	q = &squatter{prov: prov}
	go q.run(actx)
	return prov, paid, q, stop
}

// TestRotatingSquattersDoNotHoldTheGPU: while an attacker with a fresh
// key every 2-4 s awards the provider's only GPU and never starts, a
// fresh renter (a newcomer, like the attacker) and a renter that has paid
// the provider before each get a job running within 20 s of submitting
// it, and the awards they displaced are settled as expired. The paying
// renter displaces the attacker's award at once; the newcomer's award
// waits out its grace (3 s) at most, and its renter's re-quotes another
// round or two; the bound leaves the rest to a loaded machine. Without
// the newcomer rule the GPU is held and the jobs end no-match.
func TestRotatingSquattersDoNotHoldTheGPU(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov, paid, q, stop := squatted(t, ctx)
	fresh := renterOf(t, ctx, prov)
	for _, rn := range []*Node{fresh, paid} {
		name := "the newcomer's"
		if rn == paid {
			name = "the paying renter's"
		}
		if rn == fresh && prov.providerJobs.Established(rn.Host().ID().String()) {
			t.Fatal("the newcomer is established before it ran anything")
		}
		from := len(q.awards())
		waitFor(t, 30*time.Second, "a fresh award of the attacker's to hold the GPU", func() bool {
			return slices.ContainsFunc(q.awards()[from:], prov.providerJobs.Holds)
		})
		// The renter's book shows the GPU unbooked (the offer may lag a
		// job that ended by its publication gap), as a renter would
		// see it before the attack.
		waitFor(t, 30*time.Second, "the provider's offer unbooked in the renter's book", func() bool {
			o, _, ok := rn.market.Book().Get(prov.Host().ID().String())
			return ok && len(o.Booked) == 0
		})
		ran, after, j := honestRun(t, rn, linesSpec("honest", "1s", 1), 20*time.Second)
		if !ran {
			t.Fatalf("%s job under the attack: %s (%s); the attacker's awards: %v", name, j.State, j.Error, q.awards())
		}
		t.Logf("%s job ran %v after its submission", name, after.Round(time.Millisecond))
		waitJob(t, rn, j.ID, 60*time.Second, "the honest job to complete", func(j *renting.JobRecord) bool { return j.State == renting.StateCompleted })
	}
	stop()
	displaced := 0
	for _, job := range q.awards() {
		if st, _ := prov.providerJobs.LeaseState(job); st == leaseExpired {
			displaced++
		}
	}
	if displaced < 2 {
		t.Fatalf("%d awards of the attacker's ended, want one for each honest job; its awards: %v", displaced, q.awards())
	}
}

// TestEstablishedRentersSurviveARestart: the provider derives, at start,
// who has paid it from the lease records it keeps; a renter that never
// ran a job there is a newcomer.
func TestEstablishedRentersSurviveARestart(t *testing.T) {
	requireDemoImage(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	prov := startSellerWith(t, ctx, Options{}, nil)
	rn := renterOf(t, ctx, prov)
	establish(t, prov, rn)
	other := startTestNode(t, ctx, "", Options{}).Host().ID().String()

	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	if err := prov.Stop(sctx); err != nil {
		t.Fatal(err)
	}
	prov = startAgain(t, ctx, prov)
	if !prov.providerJobs.Established(rn.Host().ID().String()) {
		t.Fatal("after a restart the renter that paid is a newcomer")
	}
	if prov.providerJobs.Established(other) {
		t.Fatal("after a restart a renter that never paid is established")
	}
}
