package p2p

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/p2p/discovery/mdns"
	"github.com/libp2p/go-libp2p/p2p/host/eventbus"
)

const (
	// mdnsPoll is how often a runner that cannot start looks again; a new
	// listen address wakes it at once through the event bus, so this
	// mostly bounds how late it notices an interface coming up.
	mdnsPoll = time.Second
	// mdnsRecheck is how often a running service is compared with what it
	// would announce now. Checking is two syscalls; restarting only
	// happens when the plan changed.
	mdnsRecheck = 10 * time.Second
	// mdnsPatience: a host has no listen address for the few milliseconds
	// between New building it and Listen; only a wait longer than this is
	// worth a warning.
	mdnsPatience = 5 * time.Second
)

// mdnsRunner keeps one libp2p mDNS service running whenever the host has an
// IP listen address and the machine a multicast-capable interface, and
// replaces it when either changes. libp2p's service must not simply be
// started once: it reads the addresses at Start, fails for good when there
// are none (issue 15: it was started before the host listened), and never
// notices new ones or new interfaces. One goroutine (run) owns the service.
type mdnsRunner struct {
	h       host.Host
	service string
	log     *slog.Logger
	start   func() (io.Closer, error) // a fresh service, started
	ifaces  func() ([]net.Interface, error)
	addrsOf func(net.Interface) []string
	poll    time.Duration
	recheck time.Duration

	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex // guards the fields below, read by mdnsStatus
	running bool
	plan    mdnsPlan
	why     error
}

// runMDNS starts the runner for this host under "gleaner-<network>", a name
// scoped to the network so that LAN nodes of other networks never answer.
func (h *Host) runMDNS() error {
	svcName := "gleaner-" + h.cfg.network
	r := &mdnsRunner{
		h: h.h, service: svcName, log: h.log.With("service", svcName),
		start: func() (io.Closer, error) {
			svc := mdns.NewMdnsService(h.h, svcName, mdnsNotifee{h})
			if err := svc.Start(); err != nil {
				_ = svc.Close()
				return nil, err
			}
			return svc, nil
		},
		ifaces: net.Interfaces, addrsOf: interfaceIPs,
		poll: mdnsPoll, recheck: mdnsRecheck,
	}
	if err := r.begin(h.ctx); err != nil {
		return err
	}
	h.closer = append(h.closer, r)
	return nil
}

// begin subscribes to address changes and starts run.
func (r *mdnsRunner) begin(ctx context.Context) error {
	sub, err := r.h.EventBus().Subscribe(new(event.EvtLocalAddressesUpdated), eventbus.BufSize(4), eventbus.Name("gleaner-mdns"))
	if err != nil {
		return fmt.Errorf("p2p: mdns: %w", err)
	}
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	go r.run(ctx, sub)
	return nil
}

// Close stops the service, if one runs, and waits for the runner.
func (r *mdnsRunner) Close() error {
	r.cancel()
	<-r.done
	return nil
}

func (r *mdnsRunner) run(ctx context.Context, sub event.Subscription) {
	defer close(r.done)
	defer sub.Close()
	var svc io.Closer
	defer func() {
		if svc != nil {
			_ = svc.Close()
		}
	}()
	began := time.Now()
	var logged string // the reason last logged, so that a wait logs once
	failures := 0
	for {
		plan, why := r.currentPlan()
		r.mu.Lock()
		stale := svc != nil && (why != nil || plan.key != r.plan.key)
		r.mu.Unlock()
		if stale {
			_ = svc.Close()
			svc = nil
			r.log.Info("mdns stopped; its addresses or interfaces changed")
		}
		if why == nil && svc == nil {
			var err error
			if svc, err = r.start(); err != nil {
				why = fmt.Errorf("mdns did not start: %w", err)
			} else {
				r.logStarted(plan)
			}
		}
		r.mu.Lock()
		r.running, r.why = svc != nil, why
		if svc != nil {
			r.plan = plan
		}
		r.mu.Unlock()

		wait := r.recheck
		if svc == nil {
			failures++
			wait = min(r.poll<<min(failures-1, 4), r.recheck)
			logged = r.logWaiting(why, logged, time.Since(began))
		} else {
			failures, logged = 0, ""
		}
		select {
		case <-ctx.Done():
			return
		case <-sub.Out():
		case <-time.After(wait):
		}
	}
}

func (r *mdnsRunner) currentPlan() (mdnsPlan, error) {
	listen, err := r.h.Network().InterfaceListenAddresses()
	if err != nil {
		return mdnsPlan{}, fmt.Errorf("listing listen addresses: %w", err)
	}
	ifaces, err := r.ifaces()
	if err != nil {
		return mdnsPlan{}, fmt.Errorf("listing network interfaces: %w", err)
	}
	return planMDNS(listen, ifaces, r.addrsOf)
}

func (r *mdnsRunner) logStarted(p mdnsPlan) {
	r.log.Info("mdns on: announcing and browsing", "interfaces", strings.Join(p.ifaces, "; "), "addrs", len(p.addrs))
	if p.loopbackOnly() {
		r.log.Warn("mdns announces loopback addresses only: nodes on other machines cannot dial them; listen on 0.0.0.0 or a LAN address (p2p.listen)")
	}
}

// logWaiting logs why mDNS is not running, once per distinct reason; the
// normal wait for Listen stays at debug level until it outlasts
// mdnsPatience.
func (r *mdnsRunner) logWaiting(why error, logged string, waited time.Duration) string {
	if why.Error() == logged {
		return logged
	}
	if errors.Is(why, errMDNSNoAddrs) && waited < mdnsPatience {
		r.log.Debug("mdns waiting", "reason", why)
		return logged
	}
	r.log.Warn("mdns not running; retrying while the node runs", "reason", why)
	return why.Error()
}

// mdnsStatus is whether mDNS runs, on which interfaces, and if not, why.
func (r *mdnsRunner) mdnsStatus() (running bool, ifaces []string, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running, r.plan.ifaces, r.why
}
