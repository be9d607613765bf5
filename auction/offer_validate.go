package auction

import (
	"fmt"
	"strings"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/peer"
)

// Schema limits. Each bounds something a hostile offer could inflate; all
// are far above what a real machine needs, and together they keep a valid
// offer well under MaxOfferBytes.
const (
	MaxGPUs          = 16
	MaxOfferLifetime = 24 * time.Hour     // ExpiresAt - IssuedAt
	WindowHorizon    = 8 * 24 * time.Hour // windows may reach this far past ExpiresAt
	MaxWindows       = 256
	MaxBookings      = 256
	MaxDatasets      = 64
	MaxAddrs         = 16
	MaxImages        = 32
	maxShortString   = 64  // network, model, uuid hash
	maxLongString    = 256 // addrs, image patterns
	maxPrice         = Credits(1_000_000) * 1_000_000
)

// Continents are the continent codes a Region may carry; also the gossip
// shards (/gleaner/N/offers/<continent>/1).
var Continents = []string{"af", "an", "as", "eu", "na", "oc", "sa"}

// Workloads are the kinds of job a Policy may allow.
var Workloads = []string{"batch", "service"}

func badOffer(field, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrBadOffer, field, fmt.Sprintf(format, args...))
}

// Validate checks the schema and names the first bad field. It does not
// depend on the clock: expiry is DecodeSignedOffer's and Book.Put's job.
func (o *Offer) Validate() error {
	id, err := peer.Decode(o.Provider)
	if err != nil {
		return badOffer("provider", "not a peer ID: %v", err)
	}
	// One spelling per identity, or the book (keyed by this string) could
	// hold two offers for one provider and sequence checks would be moot.
	if id.String() != o.Provider {
		return badOffer("provider", "not in canonical form %s", id)
	}
	if o.Network == "" || len(o.Network) > maxShortString {
		return badOffer("network", "must be 1..%d bytes", maxShortString)
	}
	if o.ExpiresAt <= o.IssuedAt {
		return badOffer("expires_at", "not after issued_at")
	}
	if o.ExpiresAt-o.IssuedAt > int64(MaxOfferLifetime/time.Second) {
		return badOffer("expires_at", "more than %s after issued_at", MaxOfferLifetime)
	}
	if err := o.validateGPUs(); err != nil {
		return err
	}
	if o.Host.CPUs <= 0 || o.Host.MemoryMiB <= 0 || o.Host.DiskGiB < 0 {
		return badOffer("host", "cpus and memory must be > 0, disk >= 0")
	}
	if !isContinent(o.Region.Continent) {
		return badOffer("region.continent", "%q is not one of %v", o.Region.Continent, Continents)
	}
	if !isCountry(o.Region.Country) {
		return badOffer("region.country", "%q is not two uppercase letters", o.Region.Country)
	}
	if err := o.validatePrices(); err != nil {
		return err
	}
	if err := validateWindows("windows", o.Windows, MaxWindows); err != nil {
		return err
	}
	if n := len(o.Windows); n > 0 {
		horizon := o.ExpiresAt + int64(WindowHorizon/time.Second)
		if o.Windows[0].Start < o.IssuedAt || o.Windows[n-1].End > horizon {
			return badOffer("windows", "must lie within [issued_at, expires_at+%s]", WindowHorizon)
		}
	}
	if err := o.validateBookings("booked", o.Booked); err != nil {
		return err
	}
	if err := o.validateBookings("bronze", o.Bronze); err != nil {
		return err
	}
	if err := o.validatePolicy(); err != nil {
		return err
	}
	if err := validateStrings("datasets", o.Datasets, MaxDatasets, maxLongString); err != nil {
		return err
	}
	for i, d := range o.Datasets {
		if _, err := cid.Decode(d); err != nil {
			return badOffer(fmt.Sprintf("datasets[%d]", i), "not a CID: %v", err)
		}
	}
	if err := validateStrings("addrs", o.Addrs, MaxAddrs, maxLongString); err != nil {
		return err
	}
	if o.Calendar != nil {
		if err := o.Calendar.Validate(); err != nil {
			return fmt.Errorf("%w: calendar: %v", ErrBadOffer, err)
		}
	}
	if o.Pricing != nil {
		if o.Pricing.IsZero() {
			// One wire form per offer: no schedule is an absent one.
			return badOffer("pricing", "empty; omit it")
		}
		if err := o.Pricing.Validate(); err != nil {
			return fmt.Errorf("%w: pricing.%v", ErrBadOffer, err)
		}
	}
	return nil
}

func (o *Offer) validateGPUs() error {
	if len(o.GPUs) < 1 || len(o.GPUs) > MaxGPUs {
		return badOffer("gpus", "%d GPUs, want 1..%d", len(o.GPUs), MaxGPUs)
	}
	for i, g := range o.GPUs {
		f := fmt.Sprintf("gpus[%d]", i)
		if !isModel(g.Model) {
			return badOffer(f+".model", "%q: want 1..%d of A-Z a-z 0-9 . _ -", g.Model, maxShortString)
		}
		if g.VRAMMiB <= 0 || g.VRAMMiB > 1<<24 {
			return badOffer(f+".vram_mib", "%d out of range", g.VRAMMiB)
		}
		if _, err := parseComputeCap(g.ComputeCap); err != nil {
			return badOffer(f+".compute_capability", "%v", err)
		}
		if len(g.UUIDHash) > maxShortString {
			return badOffer(f+".uuid_hash", "longer than %d", maxShortString)
		}
	}
	return nil
}

// validateBookings holds a list of bookings (Booked, Bronze) to what
// freewindow.go's sweep assumes: sorted, non-overlapping (touching is
// allowed: counts change there), each of 1..len(GPUs) GPUs and within the
// windows' horizon.
func (o *Offer) validateBookings(field string, bs []Booking) error {
	if len(bs) > MaxBookings {
		return badOffer(field, "%d bookings, limit %d", len(bs), MaxBookings)
	}
	horizon := o.ExpiresAt + int64(WindowHorizon/time.Second)
	for i, b := range bs {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case b.Start >= b.End:
			return badOffer(f, "start not before end")
		case i > 0 && b.Start < bs[i-1].End:
			return badOffer(f, "overlaps or precedes the previous booking")
		case b.Start < o.IssuedAt || b.End > horizon:
			return badOffer(f, "must lie within [issued_at, expires_at+%s]", WindowHorizon)
		case b.GPUs < 1 || b.GPUs > len(o.GPUs):
			return badOffer(f+".gpus", "%d, want 1..%d", b.GPUs, len(o.GPUs))
		}
	}
	return nil
}

func (o *Offer) validatePrices() error {
	p := o.Prices
	for _, t := range []struct {
		name string
		c    Credits
	}{{"gold", p.Gold}, {"silver", p.Silver}, {"bronze", p.Bronze}} {
		if t.c < 0 || t.c > maxPrice {
			return badOffer("prices."+t.name, "%d out of range [0, %d]", t.c, maxPrice)
		}
	}
	// A withdrawal sells nothing, so it needs no price.
	if !o.Withdrawn && p.Gold == 0 && p.Silver == 0 && p.Bronze == 0 {
		return badOffer("prices", "no tier offered")
	}
	return nil
}

func (o *Offer) validatePolicy() error {
	p := o.Policy
	if len(p.Workloads) == 0 || len(p.Workloads) > len(Workloads) {
		return badOffer("policy.workloads", "want 1..%d of %v", len(Workloads), Workloads)
	}
	seen := map[string]bool{}
	for _, w := range p.Workloads {
		if !contains(Workloads, w) || seen[w] {
			return badOffer("policy.workloads", "%q unknown or repeated, want %v", w, Workloads)
		}
		seen[w] = true
	}
	if err := validateStrings("policy.images", p.Images, MaxImages, maxLongString); err != nil {
		return err
	}
	if p.MaxDurationSec < 0 {
		return badOffer("policy.max_duration_s", "negative")
	}
	if p.PreemptNotice < 0 || p.PreemptNotice > MaxNoticeSec {
		return badOffer("policy.preempt_notice_s", "%d, want 0..%d", p.PreemptNotice, MaxNoticeSec)
	}
	return nil
}

// validateWindows requires non-empty windows, sorted and non-overlapping
// (touching is allowed), so that lookups can binary-search.
func validateWindows(field string, ws []Window, max int) error {
	if len(ws) > max {
		return badOffer(field, "%d windows, limit %d", len(ws), max)
	}
	for i, w := range ws {
		if w.Start >= w.End {
			return badOffer(fmt.Sprintf("%s[%d]", field, i), "start not before end")
		}
		if i > 0 && w.Start < ws[i-1].End {
			return badOffer(fmt.Sprintf("%s[%d]", field, i), "overlaps or precedes the previous window")
		}
	}
	return nil
}

func validateStrings(field string, ss []string, maxN, maxLen int) error {
	if len(ss) > maxN {
		return badOffer(field, "%d entries, limit %d", len(ss), maxN)
	}
	for i, s := range ss {
		if s == "" || len(s) > maxLen {
			return badOffer(fmt.Sprintf("%s[%d]", field, i), "must be 1..%d bytes", maxLen)
		}
	}
	return nil
}

func isContinent(s string) bool { return contains(Continents, s) }

func isCountry(s string) bool {
	return len(s) == 2 && s[0] >= 'A' && s[0] <= 'Z' && s[1] >= 'A' && s[1] <= 'Z'
}

// isModel restricts models to characters the query language can spell
// without quoting, so every offered model can be searched for.
func isModel(s string) bool {
	if s == "" || len(s) > maxShortString {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-", r)
		if !ok {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
