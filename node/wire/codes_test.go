package wire

import (
	"testing"
)

// A provider that predates codes is read by its words, as it wrote them;
// a code, when present, wins over any words.
func TestLegacyCodeReadsTheWordsOfOldProviders(t *testing.T) {
	for _, c := range []struct {
		ev   Event
		want Code
	}{
		{Event{Error: "no active lease for this job"}, CodeNoLease},
		{Event{Error: "no active lease for this job: this lease was superseded by another"}, CodeNoLease},
		{Event{Error: "no active lease for this job: the award was displaced: it was not started within its grace, and another award took its GPUs"}, CodeDisplaced},
		{Event{Error: "this lease has started already; attach to follow its job"}, CodeStarted},
		{Event{Error: "the job is not running"}, CodeNotRunning},
		{Event{Error: "this award expired: it was not started in time"}, CodeExpired},
		{Event{Status: StatusNotStarted, Error: "the image could not be pulled: executor: pull x: not found"}, CodePull},
		{Event{Status: StatusNotStarted, Error: "the job's inputs could not be fetched: no providers"}, CodeInputs},
		{Event{Status: StatusNotStarted, Error: "the job could not start: OCI runtime"}, CodeStart},
		{Event{Error: "only the lease's renter may control its job"}, CodeRefused},
		// The words no longer decide once a code is sent.
		{Event{Error: "no active lease for this job", Code: CodeStarted}, CodeStarted},
		{Event{Status: StatusNotStarted, Error: "the image could not be pulled: x", Code: CodeStart}, CodeStart},
	} {
		if got := LegacyCode(c.ev); got != c.want {
			t.Errorf("%+v: code %q, want %q", c.ev, got, c.want)
		}
	}
}
