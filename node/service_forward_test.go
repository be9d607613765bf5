package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/executor"
	"github.com/gleaner-net/gleaner/node/providing"
	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/gleaner-net/gleaner/node/services"
	"github.com/gleaner-net/gleaner/node/wire"
	"github.com/gleaner-net/gleaner/p2p"
)

func postCompletion(t *testing.T, c *http.Client, body string) *http.Response {
	t.Helper()
	resp, err := c.Post("http://service/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp
}

// The renter reaches the model server's container over a forwarded
// stream of a real provider node: a completion, then a streamed one whose
// chunks arrive as they are made; a third peer is refused, and refused
// again and again until it is rate-limited; after the executor is opened
// again (a restarted daemon) the same container is found and served.
func TestServiceForwardModelServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d, j, addr := startModel(t, map[string]string{"MODELSERVER_TOKEN_DELAY": "100ms"})
	prov := startNodeWith(t, ctx, func(*repo.Config) {}, Options{})
	renter, stranger := bareHost(t, ctx), bareHost(t, ctx)
	for _, h := range []*p2p.Host{renter, stranger} {
		if err := h.LibP2P().Connect(ctx, addrInfo(prov.Host())); err != nil {
			t.Fatal(err)
		}
	}
	prov.services.Add(j.ID(), renter.ID(), addr)
	rig := &serviceRig{f: prov.services, prov: prov.Host(), renter: renter, stranger: stranger}
	c := rig.client(renter, j.ID())

	var done struct {
		Choices []struct{ Text string } `json:"choices"`
	}
	resp := postCompletion(t, c, `{"model":"gleaner-test-model","prompt":"hello world","max_tokens":3}`)
	if err := json.NewDecoder(resp.Body).Decode(&done); err != nil || len(done.Choices) != 1 || done.Choices[0].Text != "tok0 tok1 tok2" {
		t.Fatalf("completion %+v, %v", done, err)
	}

	// Streamed: 6 tokens 100 ms apart; the first chunk must be read well
	// before the last is made, or the forwarder buffered the stream.
	t0 := time.Now()
	resp = postCompletion(t, c, `{"model":"gleaner-test-model","prompt":"hi","max_tokens":6,"stream":true}`)
	var firstAt, lastAt time.Duration
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if line == "data: [DONE]" {
			break
		}
		if chunks++; chunks == 1 {
			firstAt = time.Since(t0)
		}
		lastAt = time.Since(t0)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d chunks, first at %v, last at %v", chunks, firstAt, lastAt)
	if chunks < 6 || lastAt-firstAt < 400*time.Millisecond {
		t.Fatalf("%d chunks, first at %v, last at %v: not streamed chunk by chunk", chunks, firstAt, lastAt)
	}

	// A peer that is not the renter: refused with a reason, counted.
	_, err := services.Dial(ctx, stranger, prov.Host().ID(), j.ID())
	var se *wire.ServiceError
	if !errors.As(err, &se) || se.Code != wire.ServiceRefused || !strings.Contains(se.Message, "not the renter") {
		t.Fatalf("stranger's stream: %v", err)
	}
	if st := prov.services.Stats(); st.Refused != 1 {
		t.Fatalf("stats %+v after one refusal", st)
	}
	// Beyond its burst of refusals it is reset unanswered.
	for range providing.DefaultForwardLimits().RefusalBurst + 2 {
		_, _ = services.Dial(ctx, stranger, prov.Host().ID(), j.ID())
	}
	if st := prov.services.Stats(); st.Limited == 0 || st.Refused > int64(providing.DefaultForwardLimits().RefusalBurst) {
		t.Fatalf("stats %+v after a stranger's spam", st)
	}
	// The renter is unaffected.
	postCompletion(t, c, `{"model":"gleaner-test-model","prompt":"again","max_tokens":1}`)

	// A port of the container nobody listens on: refused at once.
	prov.services.Add("silent-port", renter.ID(), netip.AddrPortFrom(addr.Addr(), addr.Port()+1))
	t0 = time.Now()
	if _, err := services.Dial(ctx, renter, prov.Host().ID(), "silent-port"); !errors.As(err, &se) || se.Code != wire.ServiceUnreachable ||
		time.Since(t0) > time.Second {
		t.Fatalf("a port that does not answer: %v after %v", err, time.Since(t0))
	}

	// The job's end: its streams go, and new ones are refused.
	prov.services.Remove(j.ID())
	if _, err := services.Dial(ctx, renter, prov.Host().ID(), j.ID()); !errors.As(err, &se) || se.Code != wire.ServiceRefused {
		t.Fatalf("renter's stream after Remove: %v", err)
	}
	// A restarted daemon opens its executor again and finds the address
	// of the container that ran on.
	again, err := executor.NewDocker(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	again.SetOwner(d.Owner())
	found, err := again.ServiceAddr(ctx, j.ID())
	if err != nil || found != addr {
		t.Fatalf("address after re-opening the executor: %v, %v; want %v", found, err, addr)
	}
	prov.services.Add(j.ID(), renter.ID(), found)
	postCompletion(t, rig.client(renter, j.ID()), `{"model":"gleaner-test-model","prompt":"back","max_tokens":1}`)
}
