package wire

import (
	"bytes"
	"testing"

	"github.com/libp2p/go-libp2p/core/protocol"
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

type protoBuf struct {
	bytes.Buffer
	proto protocol.ID
}

func (b *protoBuf) Protocol() protocol.ID { return b.proto }

// A job/2 renter's strict decoder would take a code for a broken stream:
// WriteEvent leaves it out there, and keeps it on job/3.
func TestWriteEventSendsCodesOnlyOnJob3(t *testing.T) {
	ev := Event{Type: "error", Error: "no active lease for this job", Code: CodeNoLease}
	for proto, want := range map[protocol.ID]Code{"/gleaner/local/" + JobProto: CodeNoLease, "/gleaner/local/" + JobProtoV2: ""} {
		var b protoBuf
		b.proto = proto
		if err := WriteEvent(&b, ev); err != nil {
			t.Fatal(err)
		}
		var got Event
		if err := Read(&b, MaxEventFrame, &got); err != nil {
			t.Fatal(err)
		}
		if got.Code != want || got.Error != ev.Error {
			t.Errorf("on %s: %+v, want code %q", proto, got, want)
		}
	}
}
