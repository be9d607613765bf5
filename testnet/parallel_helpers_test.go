package testnet

import "testing"

// waitsApart marks a long test that spends its time waiting on daemons
// and jobs of its own as parallel with the others so marked (`make test`
// runs up to -parallel of them at once). Each builds a network nothing
// else joins: the NAT tests' namespaces are named by a random prefix and
// their mDNS stays inside them; an in-process cluster listens on tcp/0,
// bootstraps only to its own nodes, keeps its repos in t.TempDir and
// finds its containers by its job's ID. Go starts parallel tests only
// after every serial one has ended, so a marked test never overlaps one
// left serial: those that bound a time (the burst, an offer in every book
// within 10 s, the ledger partition healed within 10 s), build and share
// the Docker-network images, or list Docker objects globally. Test time
// only: every check of the test is unchanged.
func waitsApart(t *testing.T) {
	t.Helper()
	t.Parallel()
}
