// Package provider is the provider's scheduler: the one owner of a
// provider's GPU inventory snapshot (which GPU is which, which the owner
// lets it sell), its commitments (which GPU is promised to which lease for
// which interval), its leases from award to release, and the history of
// which GPUs its bids named.
//
// A lease goes through the scheduler like this:
//
//	Plan      names the GPUs of a bid; nothing is reserved
//	Displace  ends newcomers' unstarted awards in its way (newcomer.go)
//	Claim     an award takes exactly those GPUs          -> Awarded
//	Start     the renter starts it, once                 -> Started
//	Launch    (an Action) its GPUs are free and its window has begun
//	Running   the container runs; the billing clock starts
//	Paid      vouchers report the running time they cover
//	Tick      pause, resume, stop as unpaid, stop at the end, preempt, expire
//	Release   the caller settled and the container is gone -> Ended (or Expired)
//
// It is pure logic, and deliberately so. It reads no clock: every method
// that needs the time takes now, so the same code runs on the wall clock in
// node and in virtual time in tests and the market simulator, where a
// provider's week takes well under a millisecond. It starts no goroutines
// and does no I/O: its methods return what changed (the leases to preempt,
// the Actions that Tick wants carried out), and the caller persists lease
// states, journals settlements and drives containers outside the
// scheduler's lock, so that a slow disk or Docker never blocks a quote and
// every decision can be replayed in a test.
//
// Commitments are [start, end) intervals per GPU, so that the calendar
// answers its question, "can I promise these GPUs for [start, end) at this
// tier", with CanPromise over the same records. A gold reservation for a
// future window holds its GPUs for that window alone; every other lease
// from its claim to its end. The gap before a reservation is sold: silver
// if it ends before it, bronze if it can run a while and be preempted with
// notice before it (see calendar.go).
package provider
