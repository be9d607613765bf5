// Package renter is the renter's side of an auction: the auctioneer. It
// owns one round (candidates from the offer book, requests for quotes under
// a deadline, the checks every bid must pass, admission, ranking,
// clearing at the quality-adjusted second price, with one small-job round
// in ten open to newcomers, and the award with fallback to the next
// bidder)
// and the policy around rounds (immediate re-quotes with jitter after a
// lost race for GPUs, re-auctions with capped exponential backoff after no
// match), with typed outcomes and an Explain record of why a round came
// out as it did.
//
// It is pure logic over small interfaces it declares itself: a Transport
// that carries the /auction/1 and /lease/1 exchanges, the Offers book, the
// renter's Trust in providers (reputation, convictions, round trips) and a
// Clock. node implements them with libp2p streams and the wall clock; tests
// and the market simulator implement them in memory and in virtual time,
// and run exactly this code.
//
// Money is auction.Credits (millionths of a credit per GPU-hour) throughout;
// nothing here is a float64 price.
package renter
