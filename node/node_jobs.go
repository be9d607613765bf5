package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gleaner-net/gleaner/attest"
	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/gangnet"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/renting"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/node/store"
	"github.com/gleaner-net/gleaner/node/wire"
)

// startProviderJobs wires the provider's side of the rental: the
// executor, the scheduler with the leases of the last run, and the quote,
// award, job and service handlers.
func (n *Node) startProviderJobs(context.Context) error {
	ctx := n.bg
	key, err := n.repo.Identity()
	if err != nil {
		return err
	}
	tag := execTag(n.host.ID().String())
	exec, docker := n.openExecutor(ctx)
	n.ownJobs.SetExecutor(exec, tag) // before any job starts
	n.services = providing.NewForwarder(providing.DefaultForwardLimits(), n.log.With("part", "service-forward"))
	// The provider's gang start joins its members here (docs/GANG_NETWORK.md).
	n.gangs = gangnet.New(n.host, gangnet.DefaultLimits(), n.log.With("part", "gang-net"))
	pj, err := providing.New(ctx, providing.Config{Offers: n.provider.Publisher, Network: n.host.Network(), Store: leaseStore{n.provider.store},
		Key: key, Exec: exec, Data: nodeData{n}, InputFetchTimeout: time.Duration(n.cfg.Data.InputFetchTimeoutS) * time.Second,
		OutputRetention: time.Duration(n.cfg.Data.OutputRetentionH) * time.Hour,
		MaxJobInput:     int64(n.cfg.Data.MaxJobInputGiB) << 30, DiskReserve: int64(n.cfg.Data.DiskReserveGiB) << 30, FreeDisk: n.freeDisk(exec),
		GPUs: n.gpus, Record: n.feeds.record, RecordAll: n.feeds.recordAll, Tag: tag,
		StartDeadline: n.opts.StartDeadline, WrongAnswers: n.opts.WrongAnswers,
		Spawn: func(f func()) { n.tasks.Go(f) }, OnService: n.services.Add, OnServiceEnd: n.services.Remove,
		OnServiceDrain: n.services.Drain, Gangs: n.gangs, Log: n.log.With("part", "provider-jobs")})
	if err != nil {
		return err
	}
	// The offer advertises what the scheduler has sold, so renters do not
	// ask for GPUs that are booked.
	n.provider.SetBookings(pj.Booked)
	n.provider.SetBronze(pj.BronzeHeld)
	// And the datasets it holds, for renters' placement (ranking's
	// locality term, `market offers 'dataset=...'`).
	n.provider.SetDatasets(n.heldDatasets)
	// The scheduler sees the inventory as it is now, then every change;
	// an owner reclaiming a GPU preempts the bronze leases on it.
	n.provider.WatchAvailability(pj.SetAvailability, func(a attest.Availability) {
		pj.SetAvailability(a)
		if n.claims != nil {
			n.claims.Observe(a.Inventory)
		}
	})
	// Once the scheduler knows the GPUs: the jobs of the last run whose
	// containers still run (it crashed) are adopted, the leases that
	// never launched (reservations waiting for their window) are held
	// again; the rest are recorded as interrupted and settled.
	restored, err := pj.Restore(time.Now())
	if err != nil {
		return fmt.Errorf("leases of the last run: %w", err)
	}
	if len(restored.Adopted) > 0 {
		n.log.Info("adopted the running jobs of the last run", "jobs", restored.Adopted)
	}
	if len(restored.Kept) > 0 {
		n.log.Info("kept the leases of the last run that had not started", "jobs", restored.Kept)
	}
	// Then, with what Restore holds, what the last run left on the engine
	// for any other lease goes: the containers of jobs that exited while
	// it was down, and those made ready for reservations it could not
	// hold again.
	if docker != nil {
		n.reconcileDocker(ctx, docker, func(execID string) bool {
			id, ok := strings.CutPrefix(execID, tag+"-")
			return ok && restored.Holds(id)
		})
	}
	// Served once the leases of the last run are held again, so that no
	// renter is told a kept reservation is gone. Awards journal leases and
	// runs settle them: Stop waits for these streams before it closes the
	// stores.
	h := n.host.LibP2P()
	h.SetStreamHandler(n.host.ProtocolID(wire.QuoteProto), n.tasks.handler(pj.HandleQuote))
	h.SetStreamHandler(n.host.ProtocolID(wire.AwardProto), n.tasks.handler(pj.HandleAward))
	h.SetStreamHandler(n.host.ProtocolID(wire.JobProto), n.tasks.handler(pj.HandleJob))
	// Service jobs' renters reach their containers here (providing.Forwarder);
	// closed first at Stop, so that no long response holds it up.
	h.SetStreamHandler(n.host.ProtocolID(wire.ServiceProto), n.tasks.handler(n.services.Handle))
	n.onStop(func(context.Context) error { n.services.Close(); return nil })
	// Gang members' providers reach each other here; closed at Stop with
	// the service forward, for the same reason.
	h.SetStreamHandler(n.host.ProtocolID(gangnet.Proto), n.tasks.handler(n.gangs.Handle))
	n.onStop(func(context.Context) error { n.gangs.Close(); return nil })
	n.providerJobs = pj
	// Registered after the offer's withdrawal, so run before it (stop
	// steps run last first): running jobs get their notice and their
	// renters the reason, while the host still carries it.
	n.onStop(pj.Shutdown)
	n.tasks.Go(func() { pj.Run(ctx) })
	return nil
}

// startRenterJobs starts the renter's side: the reputation it reads, the
// auctioneer and the jobs of the last run, followed again.
func (n *Node) startRenterJobs(context.Context) error {
	ctx := n.bg
	key, err := n.repo.Identity()
	if err != nil {
		return err
	}
	n.rep = renting.NewReputation(n.ledger, n.host.ID().String(), n.journal.TryEnqueue, n.tasks.Go)
	canarySpec := n.cfg.Trust.CanarySpec
	if canarySpec != "" && !filepath.IsAbs(canarySpec) {
		canarySpec = filepath.Join(n.repo.Dir, canarySpec) // config paths are the repo's, not the shell's
	}
	rj, err := renting.New(renting.Deps{Bg: ctx, Market: n.market, Store: n.store, Key: key, Log: n.log.With("part", "renter-jobs"),
		Journal: n.journal, Spawn: n.tasks.Go, Rep: n.rep, Billing: n.opts.BillingInterval, StopPayingAfter: n.opts.StopPayingAfter,
		CanarySpec: canarySpec, CanaryMinRate: n.cfg.Trust.CanaryMinRate, Access: dataAccess{n}, Split: nodeSplit{n}})
	if err != nil {
		return err
	}
	n.renterJobs = rj
	rj.Resume() // once wired: follows the jobs leased before a restart again
	return nil
}

// startServices resumes the renter's services with their gateways, on the
// ports they had.
func (n *Node) startServices(context.Context) error {
	svcs, err := services.New(services.Deps{Bg: n.bg, Store: n.store, Jobs: n.renterJobs, Market: n.market, Repo: n.repo,
		Log: n.log.With("part", "services")})
	if err != nil {
		return fmt.Errorf("services of the last run: %w", err)
	}
	svcs.Resume() // their gateways, on the ports they had
	n.renterServices = svcs
	n.onStop(func(context.Context) error { svcs.Close(); return nil })
	return nil
}

// startCounterparties tells the ledger's replication whose feeds this node
// keeps: those it deals with, as renter, provider or offer reader.
func (n *Node) startCounterparties(context.Context) error {
	pj, rj := n.providerJobs, n.renterJobs
	dealsWith := func(author string) bool {
		if _, _, ok := n.market.Book().Get(author); ok {
			return true
		}
		return pj.DealsWith(author) || rj.DealsWith(author)
	}
	n.feeds.counterparty.Store(&dealsWith)
	return nil
}

// openExecutor picks the container runtime. Without Docker, a process
// executor exists only on the local network and says it is unsafe; on any
// other network such a node simply does not bid. docker is the Docker
// executor when that is the one, labelling what it creates as this
// node's (ownDocker).
func (n *Node) openExecutor(ctx context.Context) (exec executor.Executor, docker *executor.Docker) {
	d, err := executor.NewDocker(ctx)
	if err == nil {
		n.onClose(func(context.Context) error { return d.Close() })
		if n.ownDocker(d) {
			docker = d
		}
		// Before any job, service or not, can be taken; and again before
		// each service job, in case the rules were flushed since.
		off := n.cfg.Provider.ServiceFirewall == repo.ServiceFirewallOff
		providing.EnsureServiceFirewall(ctx, off, n.log)
		if !off {
			d.SetServiceGuard(providing.RecheckServiceFirewall(n.log))
		}
		return d, docker
	}
	if !errors.Is(err, executor.ErrNoDocker) {
		n.log.Warn("no container runtime: this node will not bid for jobs", "err", err)
		return nil, nil
	}
	if n.cfg.Network != repo.NetworkLocal {
		n.log.Info("Docker is not available: this node will not bid for jobs", "err", err)
		return nil, nil
	}
	p, perr := executor.NewProcess(n.cfg.Network)
	if perr != nil {
		return nil, nil
	}
	n.log.Warn("Docker is not available: jobs run as plain processes WITHOUT isolation (UNSAFE; local network only)")
	return p, nil
}

// ownDocker makes d label what it creates with this node's peer ID and
// its repo's instance ID, which is what lets Restore adopt the running
// containers of an earlier run of this repo and reconcileDocker remove
// its leftovers. false: the repo has no instance ID, and nothing an
// earlier run left can be told ours.
func (n *Node) ownDocker(d *executor.Docker) bool {
	inst, err := n.repo.Instance()
	d.SetOwner(executor.Owner{Node: n.host.ID().String(), Instance: inst})
	if err != nil {
		// What this executor creates is labelled with an instance ID of
		// this process alone.
		n.log.Warn("no instance ID for this repo: job containers left by an earlier run are neither adopted nor removed", "err", err)
		return false
	}
	return true
}

// reconcileDocker removes what an earlier run of this repo left on the
// engine: only what carries this repo's instance ID, and of that only the
// jobs whose leases Restore does not hold (keep, by executor job ID:
// adopted jobs that run on, reservations held again). Nothing of a
// renter's stays, and nothing of anyone else's goes: other nodes sharing
// the engine keep theirs, and so does another process with this node's
// identity (a copy of this repo), which is only logged.
func (n *Node) reconcileDocker(ctx context.Context, d *executor.Docker, keep func(execID string) bool) {
	r, err := d.ReconcileReport(ctx, keep)
	if err != nil {
		n.log.Warn("could not reconcile job containers", "err", err)
	}
	if len(r.Removed) > 0 {
		n.log.Info("removed job containers left by an earlier run", "jobs", r.Removed)
	}
	if len(r.Others) > 0 {
		jobs, insts := make([]string, 0, len(r.Others)), []string{}
		for _, o := range r.Others {
			jobs = append(jobs, o.JobID)
			if !slices.Contains(insts, o.Instance) {
				insts = append(insts, o.Instance)
			}
		}
		n.log.Warn("this Docker engine runs job containers of this node's identity that another instance made "+
			"(a copy of this repo runs, or ran, on this engine): they are left alone",
			"jobs", jobs, "instances", insts, "instance", d.Owner().Instance)
	}
}

// execTag names this node's containers, so that several nodes sharing one
// Docker engine (a local testnet) never reconcile away each other's jobs.
func execTag(peerID string) string {
	sum := sha256.Sum256([]byte(peerID))
	return "g" + hex.EncodeToString(sum[:4])
}

// leaseStore keeps the provider's lease records (node/providing) in the
// node's store, under leases/<job ID>.
type leaseStore struct{ st *store.Store }

func (s leaseStore) ForEach(fn func(jobID string, raw []byte) error) error {
	return s.st.ForEach(store.BucketLeases, fn)
}

func (s leaseStore) Get(jobID string, v any) error { return s.st.Get(store.BucketLeases, jobID, v) }

func (s leaseStore) Update(fn func(tx providing.Tx) error) error {
	return s.st.Update(func(tx *store.Tx) error { return fn(leaseTx{tx}) })
}

type leaseTx struct{ tx *store.Tx }

func (t leaseTx) Get(jobID string, v any) error { return t.tx.Get(store.BucketLeases, jobID, v) }
func (t leaseTx) Put(jobID string, v any) error { return t.tx.Put(store.BucketLeases, jobID, v) }
