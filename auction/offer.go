// Package auction holds the market's pure logic: offers and their signed
// encoding, availability calendars, the offer book and its query language,
// and (later) requests, bids, leases and the auctioneer. It imports no
// libp2p networking: clocks and transports are injected so that the same
// code runs thousands of simulated nodes in virtual time.
package auction

import "time"

// Credits are testnet credits in millionths, so that prices compare and
// encode exactly. 1.5 credits per GPU-hour is Credits(1_500_000).
type Credits int64

// Tier is a service tier.
type Tier string

// The tiers: gold reserves a window, silver runs on demand and is never
// preempted inside its window, bronze is preemptible with notice.
const (
	Gold   Tier = "gold"
	Silver Tier = "silver"
	Bronze Tier = "bronze"
)

// Offer is what a provider sells. Its canonical encoding (deterministic CBOR,
// integer keys) is what gets signed; see SignedOffer.
type Offer struct {
	Provider  string    `cbor:"1,keyasint" json:"provider"` // peer ID
	Network   string    `cbor:"2,keyasint" json:"network"`
	Seq       uint64    `cbor:"3,keyasint" json:"seq"`
	IssuedAt  int64     `cbor:"4,keyasint" json:"issued_at"`  // unix seconds
	ExpiresAt int64     `cbor:"5,keyasint" json:"expires_at"` // unix seconds
	Withdrawn bool      `cbor:"6,keyasint,omitempty" json:"withdrawn,omitempty"`
	GPUs      []GPU     `cbor:"7,keyasint" json:"gpus"`
	Host      Host      `cbor:"8,keyasint" json:"host"`
	Region    Region    `cbor:"9,keyasint" json:"region"`
	Prices    Prices    `cbor:"10,keyasint" json:"prices"`
	Windows   []Window  `cbor:"11,keyasint" json:"windows"` // absolute availability, UTC, sorted, from IssuedAt on
	Policy    Policy    `cbor:"12,keyasint" json:"policy"`
	Datasets  []string  `cbor:"13,keyasint,omitempty" json:"datasets,omitempty"` // CIDs cached locally
	Addrs     []string  `cbor:"14,keyasint,omitempty" json:"addrs,omitempty"`    // reachability
	Calendar  *Calendar `cbor:"15,keyasint,omitempty" json:"calendar,omitempty"` // the owner's rules, for display
	// Pricing is the owner's price periods and surge; nil sells at Prices
	// at every hour, with no surge. See Offer.FloorFor.
	Pricing *Pricing `cbor:"16,keyasint,omitempty" json:"pricing,omitempty"`
	// Booked is what the provider has sold of its windows already: how
	// many GPUs silver and gold leases hold over each span, so renters do
	// not ask for what is taken. Bronze yields, so it is not booked.
	Booked []Booking `cbor:"17,keyasint,omitempty" json:"booked,omitempty"` // sorted, non-overlapping
	// Bronze is what preemptible (bronze) leases hold, in the same form:
	// GPUs that are free to a bronze renter only once those end, and that
	// a silver or gold lease would take by preempting them. Renters prefer
	// offers whose GPUs are idle (issue 33: a silver job placed where GPUs
	// are idle costs no bronze job its work).
	Bronze []Booking `cbor:"18,keyasint,omitempty" json:"bronze,omitempty"` // sorted, non-overlapping
}

// GPU is one GPU for sale. Simulated GPUs say so on the wire.
type GPU struct {
	Model      string `cbor:"1,keyasint" json:"model"`
	VRAMMiB    int    `cbor:"2,keyasint" json:"vram_mib"`
	ComputeCap string `cbor:"3,keyasint" json:"compute_capability"`
	UUIDHash   string `cbor:"4,keyasint,omitempty" json:"uuid_hash,omitempty"` // sha256 of the UUID, hex, first 16 bytes
	Simulated  bool   `cbor:"5,keyasint" json:"simulated"`
}

// Host is the machine's resources beyond its GPUs.
type Host struct {
	CPUs      int `cbor:"1,keyasint" json:"cpus"`
	MemoryMiB int `cbor:"2,keyasint" json:"memory_mib"`
	DiskGiB   int `cbor:"3,keyasint,omitempty" json:"disk_gib,omitempty"`
}

// Region locates the provider: ISO 3166-1 alpha-2 country, and continent
// code: af, an, as, eu, na, oc, sa.
type Region struct {
	Country   string `cbor:"1,keyasint" json:"country"`
	Continent string `cbor:"2,keyasint" json:"continent"`
}

// Prices are floors in Credits per GPU-hour; 0 means the tier is not offered.
type Prices struct {
	Gold   Credits `cbor:"1,keyasint,omitempty" json:"gold,omitempty"`
	Silver Credits `cbor:"2,keyasint,omitempty" json:"silver,omitempty"`
	Bronze Credits `cbor:"3,keyasint,omitempty" json:"bronze,omitempty"`
}

// Of is the floor for tier t; 0 when t is not offered (or not a tier).
func (p Prices) Of(t Tier) Credits {
	switch t {
	case Gold:
		return p.Gold
	case Silver:
		return p.Silver
	case Bronze:
		return p.Bronze
	}
	return 0
}

// Window is a half-open interval [Start, End) in unix seconds.
type Window struct {
	Start int64 `cbor:"1,keyasint" json:"start"`
	End   int64 `cbor:"2,keyasint" json:"end"`
}

// Booking is GPUs of an offer committed over [Start, End), unix seconds.
type Booking struct {
	Start int64 `cbor:"1,keyasint" json:"start"`
	End   int64 `cbor:"2,keyasint" json:"end"`
	GPUs  int   `cbor:"3,keyasint" json:"gpus"` // 1..len(Offer.GPUs)
}

// Policy is what the owner allows on their machine.
type Policy struct {
	Workloads      []string `cbor:"1,keyasint" json:"workloads"`                          // "batch", "service"
	Images         []string `cbor:"2,keyasint,omitempty" json:"images,omitempty"`         // allowlist patterns; empty = any
	MaxDurationSec int64    `cbor:"3,keyasint,omitempty" json:"max_duration_s,omitempty"` // 0 = no limit
	PreemptNotice  int64    `cbor:"4,keyasint" json:"preempt_notice_s"`                   // seconds of notice for bronze
	Egress         bool     `cbor:"5,keyasint,omitempty" json:"egress,omitempty"`         // containers may reach the network
}

// Calendar is the owner's availability rules in their time zone.
type Calendar struct {
	TimeZone  string         `cbor:"1,keyasint" json:"time_zone"` // IANA, e.g. "Europe/Berlin"
	Weekly    []WeeklyWindow `cbor:"2,keyasint,omitempty" json:"weekly,omitempty"`
	OneOff    []Window       `cbor:"3,keyasint,omitempty" json:"one_off,omitempty"`
	Blackouts []Window       `cbor:"4,keyasint,omitempty" json:"blackouts,omitempty"`
}

// WeeklyWindow recurs every week in the calendar's time zone. Start and End
// are "HH:MM"; End <= Start means it runs past midnight into the next day.
type WeeklyWindow struct {
	Days  []string `cbor:"1,keyasint" json:"days"` // "mon".."sun"
	Start string   `cbor:"2,keyasint" json:"start"`
	End   string   `cbor:"3,keyasint" json:"end"`
}

// SignedOffer is an offer's canonical bytes and the provider's signature
// over OfferDomain + those bytes. It is what travels on the wire.
type SignedOffer struct {
	Body []byte `cbor:"1,keyasint"`
	Sig  []byte `cbor:"2,keyasint"`
}

// OfferDomain separates offer signatures from every other signed type.
const OfferDomain = "gleaner/offer/v1\x00"

// MaxOfferBytes bounds an encoded SignedOffer, on gossip and streams alike.
const MaxOfferBytes = 64 << 10

// Expired reports whether the offer is past its expiry at now.
func (o *Offer) Expired(now time.Time) bool { return now.Unix() >= o.ExpiresAt }
