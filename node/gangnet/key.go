package gangnet

import (
	"crypto/sha256"
	"encoding/hex"
)

// Key is a gang's name on the wire and among a provider's memberships
// (Roster.Gang): a prefix of the renter's gang ID, for the logs, and a
// digest of the renter's peer ID with the whole ID. Every member's
// provider derives it again from the lease's renter and the spec's gang
// (the provider's gang start), so one renter can neither join nor block
// another renter's gang by naming it.
func Key(gangID, renter string) string {
	sum := sha256.Sum256([]byte(renter + "\x00" + gangID))
	prefix := gangID
	if len(prefix) > 64 {
		prefix = prefix[:64]
	}
	if prefix == "" || !GangPattern.MatchString(prefix) {
		prefix = "gang"
	}
	return prefix + "." + hex.EncodeToString(sum[:8])
}
