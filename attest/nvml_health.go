package attest

import (
	"errors"
	"slices"
)

// errNotSupported is NVML_ERROR_NOT_SUPPORTED: the device cannot give the
// reading (no ECC on a consumer GPU, no MIG, no events). For health it
// means "unknown", never a fault.
var errNotSupported = errors.New("Not Supported")

// xidEvent is one Xid critical error event: the device's UUID and the
// Xid code.
type xidEvent struct {
	uuid string
	xid  uint64
}

// appXids are the Xids a program causes for itself (13: a graphics engine
// exception, 31: a memory page fault, 43: the GPU stopped the faulting
// context, 45: its preemptive clean-up). A job that crashes its own
// kernel raises them; counting them as faults would let any renter take
// a provider's GPU off the market, so they are left out.
var appXids = []uint64{13, 31, 43, 45}

// xidWatch keeps an NVML source's Xid events across reads: events are
// drained once, but every reader (the monitor, the metrics, claims) must
// see the GPU's count.
type xidWatch struct {
	watched map[string]bool // by UUID: registered (true) or not supported (false)
	counts  map[string]xidCount
}

type xidCount struct {
	n    int
	last uint64
}

func newXidWatch() xidWatch {
	return xidWatch{watched: map[string]bool{}, counts: map[string]xidCount{}}
}

// watch registers dev once; an error other than errNotSupported is
// retried at the next read.
func (w *xidWatch) watch(lib nvmlLib, dev nvmlDevice, uuid string, warn func(error)) {
	if _, done := w.watched[uuid]; done {
		return
	}
	switch err := lib.watchXid(dev); {
	case err == nil:
		w.watched[uuid] = true
	case errors.Is(err, errNotSupported):
		w.watched[uuid] = false
	default:
		warn(err)
	}
}

// drain counts the events that arrived since the last read.
func (w *xidWatch) drain(lib nvmlLib, warn func(error)) {
	evs, err := lib.xidEvents()
	if err != nil {
		warn(err)
	}
	for _, e := range evs {
		if slices.Contains(appXids, e.xid) {
			continue
		}
		c := w.counts[e.uuid]
		c.n, c.last = c.n+1, e.xid
		w.counts[e.uuid] = c
	}
}

// fill sets g's Xid health from the events counted for it.
func (w *xidWatch) fill(g *GPU) {
	if !w.watched[g.UUID] {
		return // not registered: unknown
	}
	c := w.counts[g.UUID]
	g.Health.XidKnown, g.Health.Xids, g.Health.LastXid = true, c.n, c.last
}

// readHealth reads dev's ECC count and MIG mode into g. Not supported
// is unknown (ECC) or off (MIG), without a warning: most GPUs have
// neither.
func readHealth(dev nvmlDevice, g *GPU, warn func(what string, err error)) {
	switch n, err := dev.eccUncorrected(); {
	case err == nil:
		g.Health.ECCUncorrected, g.Health.ECCKnown = n, true
	case !errors.Is(err, errNotSupported):
		warn("uncorrected ECC errors", err)
	}
	switch mig, err := dev.migMode(); {
	case err == nil:
		g.MIG = mig
	case !errors.Is(err, errNotSupported):
		warn("MIG mode", err)
	}
}
