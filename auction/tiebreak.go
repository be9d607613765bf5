package auction

import "hash/fnv"

// TiebreakOf is an Env.Tiebreak drawn from seed: each provider's key is a
// hash of the seed and its ID. A renter seeds it with the round's random
// quote nonce, so that equal bids are ordered differently by every renter
// and in every round (concurrent renters spread over equal providers
// instead of herding onto the lowest ID), and yet the same round always
// ranks the same way (the simulator's seeded nonces keep it
// deterministic). A provider cannot choose its key: the nonce is drawn
// before any bid and the key depends only on it and the provider's ID.
func TiebreakOf(seed []byte) func(provider string) uint64 {
	s := append([]byte(nil), seed...)
	return func(provider string) uint64 {
		h := fnv.New64a()
		h.Write(s)
		h.Write([]byte(provider))
		return mix64(h.Sum64())
	}
}

// mix64 spreads every input bit over the whole key (MurmurHash3's
// finaliser): FNV alone leaves the high bits, which decide comparisons,
// nearly blind to the last bytes of an ID, so IDs differing only at the
// end would keep one order whatever the seed.
func mix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}
