package p2p

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
)

// peerMemory is what the peer scope of the resource manager holds for
// from, as victim sees it.
func peerMemory(victim, from *Host) int64 {
	var mem int64
	_ = victim.LibP2P().Network().ResourceManager().ViewPeer(from.ID(), func(s network.PeerScope) error {
		mem = s.Stat().Memory
		return nil
	})
	return mem
}

// frameVictim is a host with a 64 MiB budget (so 32 MiB per peer and
// 16 MiB per peer on one protocol, see resourceLimits) and a protocol whose handler reads one frame of up to
// 12 MiB and reports what ReadFrame returned.
func frameVictim(t *testing.T) (*Host, chan error) {
	victim := newTestHost(t, "framemem", ResourceLimits(64<<20, 256))
	results := make(chan error, 64)
	victim.LibP2P().SetStreamHandler(victim.ProtocolID("big/1"), func(s network.Stream) {
		_, err := ReadFrame(s, 12<<20)
		results <- err
		_ = s.Reset()
	})
	return victim, results
}

// declare opens a stream from h on big/1 and declares a frame of size
// bytes, sending none of its body.
func declare(t *testing.T, h, victim *Host, size int) network.Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := h.LibP2P().NewStream(ctx, victim.ID(), victim.ProtocolID("big/1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write(binary.AppendUvarint(nil, uint64(size))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Reset() })
	return s
}

// A frame is charged to its peer's memory budget at its header, before a
// byte of its body arrives; once the peer's frames would pass its share,
// the next is refused at its header, and finishing or dropping a frame
// gives its share back.
func TestFramesAreChargedToThePeersBudgetAtTheirHeader(t *testing.T) {
	victim, results := frameVictim(t)
	attacker := newTestHost(t, "framemem")
	if err := attacker.Connect(context.Background(), info(victim)); err != nil {
		t.Fatal(err)
	}
	base := peerMemory(victim, attacker)
	// Two 6 MiB frames fit in the 80% of 16 MiB that large frames may
	// use of one peer's share on one protocol; a third does not.
	declare(t, attacker, victim, 6<<20)
	declare(t, attacker, victim, 6<<20)
	eventually(t, 10*time.Second, "two frames reserved", func() bool {
		return peerMemory(victim, attacker)-base >= 12<<20
	})
	third := declare(t, attacker, victim, 6<<20)
	select {
	case err := <-results:
		if !errors.Is(err, ErrFrameBudget) {
			t.Fatalf("the third frame: %v, want ErrFrameBudget", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third 6 MiB frame was not refused at its header")
	}
	_ = third.Reset()

	// A small frame still passes while the large ones hold the budget:
	// they may not take the last fifth.
	s := declare(t, attacker, victim, 4<<10)
	if _, err := s.Write(make([]byte, 4<<10)); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-results:
		if err != nil {
			t.Fatalf("a small frame beside two held large ones: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the small frame was not read")
	}
	// Dropping the streams gives the reservations back. (The hosts may
	// connect again at once, for the DHT and gossip, whose fresh streams'
	// receive windows the peer's scope then holds: a few 256 KiB.)
	_ = attacker.LibP2P().Network().ClosePeer(victim.ID())
	eventually(t, 10*time.Second, "the reservations released", func() bool {
		return peerMemory(victim, attacker) < 4<<20
	})
}

// fakeScope counts a meter's reservations.
type fakeScope struct {
	mu       sync.Mutex
	reserved []int
	held     int
	limit    int
}

func (f *fakeScope) reserve(n int) (func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limit > 0 && f.held+n > f.limit {
		return nil, ErrFrameBudget
	}
	f.reserved = append(f.reserved, n)
	f.held += n
	return func() {
		f.mu.Lock()
		f.held -= n
		f.mu.Unlock()
	}, nil
}

func meterOf(f *fakeScope) *frameMeter {
	m := &frameMeter{}
	m.reserve = func(n int) error {
		rel, err := f.reserve(n)
		if err != nil {
			return err
		}
		m.release = rel
		return nil
	}
	return m
}

// delimited is msgs as uvarint-delimited messages.
func delimited(msgs ...[]byte) []byte {
	var out []byte
	for _, m := range msgs {
		out = binary.AppendUvarint(out, uint64(len(m)))
		out = append(out, m...)
	}
	return out
}

// The meter reserves each message's length at its prefix, however the
// bytes are split into reads, and holds one reservation at a time.
func TestFrameMeterFollowsMessagesAcrossReads(t *testing.T) {
	msgs := [][]byte{make([]byte, 300), {}, make([]byte, 1), make([]byte, 70000)}
	stream := delimited(msgs...)
	for _, chunk := range []int{1, 2, 3, 7, 128, 1 << 20} {
		f := &fakeScope{}
		m := meterOf(f)
		for b := stream; len(b) > 0; {
			k := min(chunk, len(b))
			if err := m.observe(b[:k]); err != nil {
				t.Fatalf("chunk %d: %v", chunk, err)
			}
			if f.held > 70000 {
				t.Fatalf("chunk %d: %d bytes held at once", chunk, f.held)
			}
			b = b[k:]
		}
		want := []int{300, 1, 70000} // an empty message reserves nothing
		if len(f.reserved) != len(want) {
			t.Fatalf("chunk %d: reserved %v, want %v", chunk, f.reserved, want)
		}
		for i := range want {
			if f.reserved[i] != want[i] {
				t.Fatalf("chunk %d: reserved %v, want %v", chunk, f.reserved, want)
			}
		}
		if f.held != 0 {
			t.Fatalf("chunk %d: %d bytes still held after the last message", chunk, f.held)
		}
	}
}

func TestFrameMeterRefusesWhatTheBudgetCannotHold(t *testing.T) {
	f := &fakeScope{limit: 1 << 20}
	m := meterOf(f)
	if err := m.observe(binary.AppendUvarint(nil, 2<<20)); !errors.Is(err, ErrFrameBudget) {
		t.Fatalf("a 2 MiB message on a 1 MiB budget: %v", err)
	}
	m = meterOf(&fakeScope{})
	if err := m.observe(binary.AppendUvarint(nil, maxMeteredMessage+1)); !errors.Is(err, ErrFrameBudget) {
		t.Fatalf("a message over maxMeteredMessage: %v", err)
	}
	m = meterOf(&fakeScope{})
	if err := m.observe([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}); err == nil {
		t.Fatal("an 11-byte prefix was accepted")
	}
}

// FuzzFrameMeter: whatever bytes a peer sends, in whatever reads, the
// meter never panics and never holds more than one message's reservation.
func FuzzFrameMeter(f *testing.F) {
	f.Add(delimited([]byte("hello"), make([]byte, 200)), uint8(3))
	f.Add([]byte{0x80, 0x80, 0x80, 0x01}, uint8(1))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, uint8(2))
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		fs := &fakeScope{}
		m := meterOf(fs)
		step := int(chunk%16) + 1
		for len(b) > 0 {
			k := min(step, len(b))
			if err := m.observe(b[:k]); err != nil {
				break
			}
			b = b[k:]
		}
		if len(fs.reserved) > 0 && fs.held > fs.reserved[len(fs.reserved)-1] {
			t.Fatalf("%d bytes held, more than the last message's %d", fs.held, fs.reserved[len(fs.reserved)-1])
		}
		m.done()
		if fs.held != 0 {
			t.Fatalf("%d bytes held after done", fs.held)
		}
	})
}
