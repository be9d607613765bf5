package providing

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/auction"
	"github.com/gleaner-net/gleaner/ledger"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/offers"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// The provider over fakes: an executor whose jobs the test ends, an
// in-memory lease store, a fixed offer, and job streams that are
// in-memory pipes. The tests run in synctest bubbles, so the provider's
// own clocks (heartbeats, notices, graces) cost nothing and nothing
// sleeps on the wall clock.

const testNet = "test"

// fakeOffers is the provider's own offer, fixed.
type fakeOffers struct {
	mu    sync.Mutex
	offer *auction.Offer
	avail attest.Availability
}

func (o *fakeOffers) Current() *auction.Offer {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.offer
}
func (o *fakeOffers) Settings() offers.Settings { return offers.Settings{} }
func (o *fakeOffers) Availability() attest.Availability {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.avail
}
func (o *fakeOffers) Refresh() {}

// memStore is the lease records in memory, as JSON like node's bbolt.
type memStore struct {
	mu   sync.Mutex
	recs map[string][]byte
}

func newMemStore() *memStore { return &memStore{recs: map[string][]byte{}} }

func (m *memStore) ForEach(fn func(string, []byte) error) error {
	m.mu.Lock()
	recs := map[string][]byte{}
	for k, v := range m.recs {
		recs[k] = v
	}
	m.mu.Unlock()
	for k, v := range recs {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

func (m *memStore) Get(jobID string, v any) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return memTx{m}.Get(jobID, v)
}

func (m *memStore) Update(fn func(Tx) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return fn(memTx{m})
}

type memTx struct{ m *memStore }

func (t memTx) Get(jobID string, v any) error {
	raw, ok := t.m.recs[jobID]
	if !ok {
		return errors.New("no record")
	}
	return json.Unmarshal(raw, v)
}

func (t memTx) Put(jobID string, v any) error {
	raw, err := json.Marshal(v)
	if err == nil {
		t.m.recs[jobID] = raw
	}
	return err
}

// fakeExec runs fakeJobs. Start hands each to the test on started; with
// startErr set it fails instead; with hold set it blocks until hold is
// closed or its context ends (an image pull in progress). Its jobs'
// outputs volume holds outputs (a tar stream), if set.
type fakeExec struct {
	started  chan *fakeJob
	startErr error
	hold     chan struct{}
	outputs  []byte
	kind     string // Kind's answer; "" is "fake"
	netns    string // set: its jobs run "in" this network namespace (netnsJob)

	mu      sync.Mutex
	orphans map[string]executor.Adopted // by executor job ID: what Adopt finds
}

func newFakeExec() *fakeExec {
	return &fakeExec{started: make(chan *fakeJob, 8), orphans: map[string]executor.Adopted{}}
}

func (e *fakeExec) Kind() string {
	if e.kind != "" {
		return e.kind
	}
	return "fake"
}
func (e *fakeExec) Unsafe() bool { return false }
func (e *fakeExec) Reconcile(context.Context, func(string) bool) ([]string, error) {
	return nil, nil
}

func (e *fakeExec) Start(ctx context.Context, spec executor.Spec, _ executor.Hooks) (executor.Job, error) {
	if e.hold != nil {
		select {
		case <-e.hold:
		case <-ctx.Done():
			return nil, fmt.Errorf("executor: start %s: %w", spec.JobID, context.Cause(ctx))
		}
	}
	if e.startErr != nil {
		return nil, e.startErr
	}
	j := newFakeJob(spec, time.Now())
	j.outputs = e.outputs
	e.started <- j
	if e.netns != "" {
		return &netnsJob{j, e.netns}, nil
	}
	return j, nil
}

// netnsJob is a fakeJob whose "container" has the network namespace at
// path, as a Docker job's has (executor.Netnser).
type netnsJob struct {
	*fakeJob
	path string
}

func (j *netnsJob) Netns(context.Context) (string, error) { return j.path, nil }

// Adopt takes over an orphan the test left with the executor.
func (e *fakeExec) Adopt(_ context.Context, jobID string) (executor.Adopted, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	j, ok := e.orphans[jobID]
	if !ok {
		return nil, errors.New("no such container")
	}
	return j, nil
}

// fakeJob is a container: it runs until the test ends it (exit) or the
// provider stops it, which it obeys at once.
type fakeJob struct {
	spec    executor.Spec
	logs    *executor.LogBuffer
	began   time.Time
	done    chan struct{} // closed when it has exited
	stopped chan struct{} // closed by the first Stop

	mu       sync.Mutex
	res      executor.Result
	exited   bool
	stopOnce sync.Once
	notice   time.Duration // Stop's
	removed  bool
	outputs  []byte // a tar stream of its outputs volume; nil: none
}

func newFakeJob(spec executor.Spec, began time.Time) *fakeJob {
	return &fakeJob{spec: spec, logs: executor.NewLogBuffer(1 << 20), began: began, done: make(chan struct{}), stopped: make(chan struct{})}
}

// exit ends the job by itself with code.
func (j *fakeJob) exit(code int, stopped bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.exited {
		return
	}
	j.exited = true
	j.res = executor.Result{ExitCode: code, Stopped: stopped, StartedAt: j.began, FinishedAt: time.Now()}
	_ = j.logs.Close()
	close(j.done)
}

func (j *fakeJob) ID() string { return j.spec.JobID }

func (j *fakeJob) Wait(ctx context.Context) (executor.Result, error) {
	select {
	case <-j.done:
		j.mu.Lock()
		defer j.mu.Unlock()
		return j.res, nil
	case <-ctx.Done():
		return executor.Result{}, ctx.Err()
	}
}

func (j *fakeJob) Stop(_ context.Context, notice time.Duration) error {
	j.stopOnce.Do(func() {
		j.mu.Lock()
		j.notice = notice
		j.mu.Unlock()
		close(j.stopped)
	})
	j.exit(143, true)
	return nil
}

func (j *fakeJob) wasStopped() bool {
	select {
	case <-j.stopped:
		return true
	default:
		return false
	}
}

func (j *fakeJob) Pause(context.Context) error  { return nil }
func (j *fakeJob) Resume(context.Context) error { return nil }
func (j *fakeJob) Logs() *executor.LogBuffer    { return j.logs }
func (j *fakeJob) CopyCheckpoint(context.Context) (io.ReadCloser, error) {
	return nil, executor.ErrNoCheckpoint
}
func (j *fakeJob) CopyOutputs(context.Context) (io.ReadCloser, error) {
	if j.outputs == nil || j.spec.OutputPath == "" {
		return nil, executor.ErrNoOutputs
	}
	return io.NopCloser(bytes.NewReader(j.outputs)), nil
}
func (j *fakeJob) Remove(context.Context) error {
	j.exit(137, true)
	j.mu.Lock()
	defer j.mu.Unlock()
	j.removed = true
	return nil
}
func (j *fakeJob) wasRemoved() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.removed
}
func (j *fakeJob) StartedAt() time.Time { return j.began }
func (j *fakeJob) Paused() bool         { return false }

// pipeEnd is one end of an in-memory job stream.
type pipeEnd struct{ net.Conn }

func (p pipeEnd) Reset() error { return p.Conn.Close() }

// rig is a provider of gpus GPUs over fakes, and the journal it wrote.
type rig struct {
	t      *testing.T
	pj     *Provider
	exec   *fakeExec
	store  *memStore
	key    crypto.PrivKey
	offers *fakeOffers
	cancel context.CancelFunc

	mu       sync.Mutex
	recorded []recorded
}

type recorded struct {
	typ     string
	payload []byte
}

func testKey(t *testing.T) (crypto.PrivKey, string) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id.String()
}

// newRig makes a provider selling gpus simulated GPUs, now, from a fresh
// store; newRigOver does from the given store, key and executor (a
// provider started again).
func newRig(t *testing.T, gpus int, opts ...func(*Config)) *rig {
	key, _ := testKey(t)
	return newRigOver(t, gpus, key, newMemStore(), newFakeExec(), opts...)
}

// opts change the provider's Config before it is made (its Data, its
// input bounds).
func newRigOver(t *testing.T, gpus int, key crypto.PrivKey, store *memStore, exec *fakeExec, opts ...func(*Config)) *rig {
	t.Helper()
	id, _ := peer.IDFromPrivateKey(key)
	now := time.Now()
	o := &auction.Offer{
		Provider: id.String(), Network: testNet, Seq: 1, IssuedAt: now.Unix() - 60, ExpiresAt: now.Unix() + 12*3600,
		Host:    auction.Host{CPUs: 64, MemoryMiB: 512 << 10},
		Region:  auction.Region{Country: "DE", Continent: "eu"},
		Prices:  auction.Prices{Gold: 300_000, Silver: 200_000, Bronze: 100_000},
		Windows: []auction.Window{{Start: now.Unix() - 60, End: now.Unix() + 24*3600}},
		Policy:  auction.Policy{Workloads: []string{"batch", "service"}, PreemptNotice: 30},
	}
	var inv attest.Inventory
	avail := attest.Availability{Withdrawn: map[int]string{}}
	for i := range gpus {
		uuid := fmt.Sprintf("GPU-%d", i)
		inv.GPUs = append(inv.GPUs, attest.GPU{Index: i, UUID: uuid, Model: "H100", VRAMMiB: 81559, ComputeCap: "9.0", Simulated: true})
		o.GPUs = append(o.GPUs, auction.GPU{Model: "H100", VRAMMiB: 81559, ComputeCap: "9.0", UUIDHash: attest.UUIDHash(uuid), Simulated: true})
		avail.Available = append(avail.Available, i)
	}
	avail.Inventory = inv
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &rig{t: t, exec: exec, store: store, key: key, offers: &fakeOffers{offer: o, avail: avail}, cancel: cancel}
	cfg := Config{Offers: r.offers, Network: testNet, Store: store, Key: key, Exec: exec, Tag: "t",
		Record: r.record, Log: quietLog}
	for _, o := range opts {
		o(&cfg)
	}
	pj, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pj.SetAvailability(avail)
	r.pj = pj
	return r
}

func (r *rig) record(typ string, payload []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recorded = append(r.recorded, recorded{typ, payload})
}

// settlements are the settlements the provider journaled.
func (r *rig) settlements() []ledger.Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ledger.Settlement
	for _, e := range r.recorded {
		if e.typ != ledger.TypeSettlement {
			continue
		}
		var s ledger.Settlement
		if err := json.Unmarshal(e.payload, &s); err != nil {
			r.t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// renter is a renter of the rig's provider: its key and what it leased.
type renter struct {
	r   *rig
	key crypto.PrivKey
	id  string
}

func (r *rig) renter() *renter {
	k, id := testKey(r.t)
	return &renter{r: r, key: k, id: id}
}

// spec is a job spec of tier on one GPU.
func spec(name string, tier auction.Tier) []byte {
	return fmt.Appendf(nil, "name: %s\nimage: example.org/job:1\ncommand: [\"run\"]\nresources: {gpus: 1}\n"+
		"tier: %s\nmax_price: 1.00\nduration: {expected: 10m, max: 30m}\nallow_simulated: true\nretry: {max_reauctions: 0}\n",
		name, tier)
}

// lease quotes and awards job with specYAML as the renter's node does
// (auction/renter's proposal) and returns the co-signed lease.
func (rt *renter) lease(job string, specYAML []byte) []byte {
	t := rt.r.t
	t.Helper()
	rep := rt.r.pj.quote(wire.QuoteRequest{JobID: job, Nonce: []byte("the renter nonce"), Spec: specYAML}, rt.id)
	if rep.Decline != "" {
		t.Fatalf("quote for %s declined: %s", job, rep.Decline)
	}
	b, _, err := auction.DecodeSignedBid(rep.Bid, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	l := &auction.Lease{JobID: job, Network: testNet, Renter: rt.id, Provider: b.Provider,
		Tier: b.Tier, Price: b.Price, GPUs: b.GPUs, Start: b.Start, End: b.Start + b.DurationSec,
		NoticeSec: b.NoticeSec, BillingSec: 300, Bid: rep.Bid, GPUUUIDHash: b.GPUHashes, SpecHash: b.SpecHash}
	sl, err := auction.ProposeLease(l, rt.key)
	if err != nil {
		t.Fatal(err)
	}
	prop, err := sl.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rt.r.pj.accept(prop, rt.id)
	if err != nil {
		t.Fatalf("award of %s refused: %v", job, err)
	}
	return raw
}

// follower is the renter's end of a job stream: the events it read.
type follower struct {
	c      net.Conn
	events chan wire.Event // closed when the stream ends
}

// request opens a job stream to the provider for req and follows it.
func (rt *renter) request(req wire.JobRequest) *follower {
	mine, theirs := net.Pipe()
	go rt.r.pj.serveJob(pipeEnd{theirs}, rt.id)
	f := &follower{c: mine, events: make(chan wire.Event, 1024)}
	go func() {
		defer close(f.events)
		for {
			var ev wire.Event
			if err := wire.Read(mine, wire.MaxEventFrame, &ev); err != nil {
				return
			}
			f.events <- ev
		}
	}()
	// A refusal after the head closes the stream before the body is
	// written: the events say why.
	_ = wire.WriteJobRequest(mine, &req)
	return f
}

func (rt *renter) start(raw, specYAML []byte) *follower {
	return rt.request(wire.JobRequest{Kind: "start", Lease: raw, Spec: specYAML})
}

// until reads events until one that match accepts, failing the test if
// the stream ends first; heartbeats are skipped.
func (f *follower) until(t *testing.T, what string, match func(wire.Event) bool) wire.Event {
	t.Helper()
	var seen []string
	for ev := range f.events {
		if match(ev) {
			return ev
		}
		if ev.Type != wire.EventHeartbeat {
			seen = append(seen, fmt.Sprintf("%s/%s %q %s", ev.Type, ev.Status, ev.Error, ev.Code))
		}
	}
	t.Fatalf("the stream ended without %s; it carried %v", what, seen)
	return wire.Event{}
}

// end reads the stream to its end and returns its last event but
// heartbeats.
func (f *follower) end() wire.Event {
	var last wire.Event
	for ev := range f.events {
		if ev.Type != wire.EventHeartbeat {
			last = ev
		}
	}
	return last
}

func (f *follower) close() { _ = f.c.Close() }

func isType(typ wire.EventType) func(wire.Event) bool {
	return func(ev wire.Event) bool { return ev.Type == typ }
}

func isStatus(st wire.Status) func(wire.Event) bool {
	return func(ev wire.Event) bool { return ev.Status == st }
}

// stop ends the rig's background context, as the node's Stop does last.
func (r *rig) stop() { r.cancel() }
