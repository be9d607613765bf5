package auction

import (
	"strings"
	"time"
)

// Rejection reasons. Constant strings, so that rejections of 100,000
// offers share them and `job explain` can group by them.
const (
	ReasonWithdrawn       = "offer withdrawn"
	ReasonExpired         = "offer expired"
	ReasonTierNotOffered  = "tier not offered"
	ReasonFloorAboveMax   = "price floor above max_price"
	ReasonSimulated       = "simulated GPUs and allow_simulated is false"
	ReasonRegion          = "outside placement.regions"
	ReasonCountryDenied   = "country in placement.deny_countries"
	ReasonTooFewGPUs      = "fewer GPUs than resources.gpus"
	ReasonNoModel         = "no GPU of a model in resources.models"
	ReasonVRAM            = "no GPU of an accepted model has min_vram_gb"
	ReasonTooFewMatching  = "too few GPUs of an accepted model with min_vram_gb"
	ReasonCPUs            = "fewer host CPUs than resources.cpus"
	ReasonMemory          = "less host memory than resources.memory_gb"
	ReasonWorkload        = "policy does not allow this workload"
	ReasonPolicyDuration  = "duration.max longer than the policy allows"
	ReasonImage           = "image not in the policy's allowlist"
	ReasonNotAvailableNow = "not available now"
	ReasonWindowTooShort  = "window ends before duration.max"
	ReasonStartPassed     = "start has passed"
	ReasonNotReserved     = "no window covers [start, start+duration.max)"
	ReasonBooked          = "too few GPUs left unbooked for the job's window"
	ReasonRTT             = "measured RTT above placement.max_rtt_ms"
)

// matcher holds what the checks need from the spec, derived once per
// auction so that each check compares precomputed values.
type matcher struct {
	spec      *JobSpec
	now       int64
	tierIdx   int   // index into offerPrice
	vramBytes int64 // per GPU
	memBytes  int64
	maxSecs   int64
	images    []string // spellings of spec.Image for the allowlist
	rttOf     func(string) (time.Duration, bool)
}

func newMatcher(spec *JobSpec, env Env) *matcher {
	return &matcher{
		spec:      spec,
		now:       env.Now.Unix(),
		tierIdx:   tierIndex(spec.Tier),
		vramBytes: int64(spec.Resources.MinVRAMGB) * 1e9,
		memBytes:  int64(spec.Resources.MemoryGB) * 1e9,
		maxSecs:   int64(spec.Duration.Max / time.Second),
		images:    imageNames(spec.Image),
		rttOf:     env.RTT,
	}
}

// tierIndex is the tier's position in offerPrice; -1 for an unknown tier,
// which no offer sells.
func tierIndex(t Tier) int {
	switch t {
	case Gold:
		return 0
	case Silver:
		return 1
	case Bronze:
		return 2
	}
	return -1
}

// offerPrice is o's floor for the tier index; 0 when not offered.
func offerPrice(o *Offer, tier int) Credits {
	switch tier {
	case 0:
		return o.Prices.Gold
	case 1:
		return o.Prices.Silver
	case 2:
		return o.Prices.Bronze
	}
	return 0
}

func (m *matcher) live(o *Offer) string {
	if o.Withdrawn {
		return ReasonWithdrawn
	}
	if m.now >= o.ExpiresAt {
		return ReasonExpired
	}
	return ""
}

func (m *matcher) tier(o *Offer) string {
	if offerPrice(o, m.tierIdx) <= 0 {
		return ReasonTierNotOffered
	}
	return ""
}

// price compares the floor in force for the job (Offer.FloorFor, the rule
// the provider quotes by) with max_price. The offer's own floor and the
// highest any period can raise it to settle most offers without calendar
// arithmetic.
func (m *matcher) price(o *Offer) string {
	floor := offerPrice(o, m.tierIdx)
	if floor > m.spec.MaxPrice {
		return ReasonFloorAboveMax
	}
	if o.Pricing == nil || o.Pricing.peakBound(o.Prices, m.tierIdx) <= m.spec.MaxPrice {
		return ""
	}
	start := m.now
	if m.spec.Tier == Gold {
		start = m.spec.Start.Unix()
	}
	if o.Pricing.floorFor(o.Prices, m.tierIdx, start, m.maxSecs) > m.spec.MaxPrice {
		return ReasonFloorAboveMax
	}
	return ""
}

func (m *matcher) simulated(o *Offer) string {
	if m.spec.AllowSimulated {
		return ""
	}
	for i := range o.GPUs {
		if o.GPUs[i].Simulated {
			return ReasonSimulated
		}
	}
	return ""
}

func (m *matcher) region(o *Offer) string {
	if rs := m.spec.Placement.Regions; len(rs) > 0 && !contains(rs, o.Region.Continent) {
		return ReasonRegion
	}
	return ""
}

func (m *matcher) country(o *Offer) string {
	if contains(m.spec.Placement.DenyCountries, o.Region.Country) {
		return ReasonCountryDenied
	}
	return ""
}

// gpus counts the offer's GPUs that are of an accepted model and have
// enough memory: the job's GPUs must all be such. The three reasons say
// which requirement ran out first, which is what a renter would relax.
func (m *matcher) gpus(o *Offer) string {
	want := m.spec.Resources.GPUs
	if len(o.GPUs) < want {
		return ReasonTooFewGPUs
	}
	models, fits := 0, 0
	// Offers are mostly one model several times: decide each run once.
	prev, prevOK := "", false
	for i := range o.GPUs {
		g := &o.GPUs[i]
		if i == 0 || g.Model != prev {
			prev, prevOK = g.Model, m.acceptsModel(g.Model)
		}
		if !prevOK {
			continue
		}
		models++
		if int64(g.VRAMMiB)*bytesPerMiB >= m.vramBytes {
			fits++
		}
	}
	switch {
	case models == 0:
		return ReasonNoModel
	case fits == 0:
		return ReasonVRAM
	case fits < want:
		return ReasonTooFewMatching
	}
	return ""
}

func (m *matcher) acceptsModel(model string) bool {
	ms := m.spec.Resources.Models
	if len(ms) == 0 {
		return true
	}
	for _, a := range ms {
		// Models are ASCII (Validate, ParseJobSpec), so equal-fold
		// strings have equal lengths; most candidates fail on that.
		if len(a) == len(model) && strings.EqualFold(a, model) {
			return true
		}
	}
	return false
}

func (m *matcher) host(o *Offer) string {
	if o.Host.CPUs < m.spec.Resources.CPUs {
		return ReasonCPUs
	}
	if int64(o.Host.MemoryMiB)*bytesPerMiB < m.memBytes {
		return ReasonMemory
	}
	return ""
}

// policy applies the owner's limits. The max duration binds every tier: a
// bronze lease is also for duration.max, and the owner said no job runs
// longer, whatever it pays.
func (m *matcher) policy(o *Offer) string {
	p := &o.Policy
	if !contains(p.Workloads, m.spec.Workload) {
		return ReasonWorkload
	}
	if p.MaxDurationSec > 0 && m.maxSecs > p.MaxDurationSec {
		return ReasonPolicyDuration
	}
	if !imageAllowed(p.Images, m.images) {
		return ReasonImage
	}
	return ""
}

// calendar checks the tier's promise against the offer's windows (touching
// windows count as one, as availableSecs joins them):
//   - bronze is preemptible, so it needs only to be able to start now;
//   - silver runs to completion without preemption, so [now, now+max)
//     must lie inside the availability that contains now;
//   - gold reserves [start, start+max), which must lie inside one window,
//     and a start already past cannot be reserved.
//
// Within those windows, what the offer has booked (silver and gold leases
// sold already) must leave resources.gpus free over the same span: from
// now for silver, the reservation for gold, and now alone for bronze,
// which may backfill the gap before a reservation and yield to it.
func (m *matcher) calendar(o *Offer) string {
	from, to := m.now, m.now+1
	switch m.spec.Tier {
	case Bronze:
		if availableSecs(o.Windows, m.now) <= 0 {
			return ReasonNotAvailableNow
		}
	case Silver:
		switch left := availableSecs(o.Windows, m.now); {
		case left <= 0:
			return ReasonNotAvailableNow
		case left < m.maxSecs:
			return ReasonWindowTooShort
		}
		to = m.now + m.maxSecs
	case Gold:
		start := m.spec.Start.Unix()
		if start < m.now {
			return ReasonStartPassed
		}
		if availableSecs(o.Windows, start) < m.maxSecs {
			return ReasonNotReserved
		}
		from, to = start, start+m.maxSecs
	}
	if len(o.Booked) > 0 && len(o.GPUs)-bookedPeak(o.Booked, from, to) < m.spec.Resources.GPUs {
		return ReasonBooked
	}
	return ""
}

// rtt rejects only a measured RTT above the limit. An unmeasured one
// passes: RTT is measured when the auctioneer contacts a candidate for a
// quote, so before that almost every provider is unmeasured, and rejecting
// them would leave a fresh node with nothing to ask. The limit is enforced
// strictly after quoting, by AdmitBids, where an unmeasured RTT fails.
func (m *matcher) rtt(o *Offer) string {
	limit := m.spec.Placement.MaxRTT
	if limit <= 0 || m.rttOf == nil {
		return ""
	}
	if d, ok := m.rttOf(o.Provider); ok && d > limit {
		return ReasonRTT
	}
	return ""
}
