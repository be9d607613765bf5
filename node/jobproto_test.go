package node

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
)

// FuzzJobMessages feeds arbitrary frames to the decoders of every rental
// message a hostile peer can send: no input may panic, and anything
// accepted must survive a re-encode and decode unchanged in meaning.
func FuzzJobMessages(f *testing.F) {
	for _, seed := range []string{
		`{"job_id":"x","nonce":"AAEC","spec":"bmFtZTogeA=="}`,
		`{"kind":"start","lease":"oA==","spec":"eA==","secrets":{"K":"V"}}`,
		`{"lease":"oA=="}`, `{"bid":"oA=="}`, `{"type":"log","log":"aGk=","time":"2026-11-29T00:00:00Z"}`,
		`{"kind":"start","extra":1}`, `[]`, `{"job_id":"x"} {"job_id":"y"}`, "\xff",
		`{"kind":"cancel","lease":"oA==","nonce":"AAEC"}`, `{"spec":"eA==","checkpoint":"oA==","registry_auth":{"username":"u"}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, v := range []any{&wire.QuoteRequest{}, &wire.QuoteReply{}, &wire.AwardRequest{}, &wire.AwardReply{}, &wire.JobRequest{},
			&wire.JobHead{}, &wire.JobBody{}, &wire.Event{}} {
			if wire.Decode(data, v) != nil {
				continue
			}
			var buf bytes.Buffer
			if err := wire.Write(&buf, v); err != nil {
				t.Fatalf("accepted message does not re-encode: %v", err)
			}
			if err := wire.Read(&buf, wire.MaxJobFrame, v); err != nil {
				t.Fatalf("re-encoded message does not decode: %v", err)
			}
		}
	})
}

func TestJobFramesAreBounded(t *testing.T) {
	var buf bytes.Buffer
	huge := bytes.Repeat([]byte("x"), wire.MaxJobFrame+1)
	if err := p2p.WriteFrame(&buf, huge, wire.MaxJobFrame+1); err != nil {
		t.Fatal(err)
	}
	var req wire.JobRequest
	if err := wire.Read(&buf, wire.MaxJobFrame, &req); err == nil {
		t.Fatal("a frame over the limit was read")
	}
	// Each reader takes only what its message can need: an event or a
	// reply the size of a start request is refused before it is read.
	for _, limit := range []int{wire.MaxEventFrame, wire.MaxRequestFrame} {
		buf.Reset()
		if err := p2p.WriteFrame(&buf, bytes.Repeat([]byte("x"), limit+1), wire.MaxJobFrame); err != nil {
			t.Fatal(err)
		}
		var ev wire.Event
		if err := wire.Read(&buf, limit, &ev); !errors.Is(err, p2p.ErrFrameTooLarge) {
			t.Fatalf("a %d-byte frame under a %d-byte limit: %v, want ErrFrameTooLarge", limit+1, limit, err)
		}
	}
	if err := wire.Decode([]byte(`{"kind":"start","surprise":true}`), &req); err == nil {
		t.Fatal("an unknown field was accepted")
	}
	if err := wire.Decode([]byte(`{"kind":"start"}{"kind":"cancel"}`), &req); err == nil {
		t.Fatal("trailing data was accepted")
	}
}

// A job request goes as a head and, for a start only, a body; the head
// alone is bounded by MaxJobHeadFrame, so a body never fits in it.
func TestJobRequestsTravelAsHeadAndBody(t *testing.T) {
	start := &wire.JobRequest{Kind: "start", Lease: []byte{1, 2}, Nonce: []byte{3}, Spec: []byte("name: x"),
		Secrets: map[string]string{"K": "V"}, Checkpoint: bytes.Repeat([]byte{7}, 1<<20)}
	var buf bytes.Buffer
	if err := wire.WriteJobRequest(&buf, start); err != nil {
		t.Fatal(err)
	}
	head, err := wire.ReadJobHead(&buf)
	if err != nil {
		t.Fatal(err)
	}
	body, err := wire.ReadJobBody(&buf)
	if err != nil {
		t.Fatal(err)
	}
	got := head.WithBody(body)
	if got.Kind != "start" || !bytes.Equal(got.Lease, start.Lease) || !bytes.Equal(got.Checkpoint, start.Checkpoint) ||
		got.Secrets["K"] != "V" || !bytes.Equal(got.Nonce, start.Nonce) || string(got.Spec) != "name: x" {
		t.Fatalf("the request changed on the way: %+v", got.Head())
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes left after the body", buf.Len())
	}
	// A cancel is its head alone.
	if err := wire.WriteJobRequest(&buf, &wire.JobRequest{Kind: "cancel", Lease: []byte{1}}); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ReadJobHead(&buf); err != nil || buf.Len() != 0 {
		t.Fatalf("a cancel: %v, %d bytes after its head", err, buf.Len())
	}
	// An old-style start, spec and checkpoint in its first frame, is
	// refused at the head's limit, before it is read.
	if err := wire.Write(&buf, start); err != nil {
		t.Fatal(err)
	}
	if _, err := wire.ReadJobHead(&buf); !errors.Is(err, p2p.ErrFrameTooLarge) {
		t.Fatalf("a 1 MiB head: %v, want ErrFrameTooLarge", err)
	}
}
