package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"
)

func TestLogBufferKeepsTail(t *testing.T) {
	b := NewLogBuffer(10)
	b.Write([]byte("0123"))
	b.Write([]byte("456789ab"))
	if got := string(b.Bytes()); got != "23456789ab" {
		t.Fatalf("tail %q", got)
	}
	b.Write([]byte("a write larger than the ring"))
	if got := string(b.Bytes()); got != "n the ring" || b.Written() != 40 {
		t.Fatalf("tail %q written %d", got, b.Written())
	}
}

// A subscriber that never reads must neither block the writer nor make the
// buffer grow; when it comes back it learns how much it lost.
func TestLogBufferSlowSubscriber(t *testing.T) {
	const size = 4096
	b := NewLogBuffer(size)
	slow := b.Subscribe()
	fast := b.Subscribe()
	defer slow.Close()

	done := make(chan struct{})
	var fastGot bytes.Buffer
	go func() {
		defer close(done)
		for {
			chunk, err := fast.Next(context.Background())
			if err != nil {
				return
			}
			fastGot.Write(chunk)
		}
	}()

	line := []byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde\n")
	const lines = 100000 // 6.4 MB through a 4 KiB ring
	t0 := time.Now()
	for i := 0; i < lines; i++ {
		b.Write(line)
	}
	took := time.Since(t0)
	b.Close()
	<-done
	t.Logf("%d MB written in %v past a stalled subscriber", lines*len(line)>>20, took)
	if took > 5*time.Second {
		t.Fatalf("writer slowed down: %v", took)
	}
	if cap(b.ring) != size {
		t.Fatalf("ring grew to %d", cap(b.ring))
	}

	// The slow subscriber gets the retained tail, then EOF.
	var got bytes.Buffer
	for {
		chunk, err := slow.Next(context.Background())
		if errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		got.Write(chunk)
	}
	total := int64(lines * len(line))
	if got.Len() != size || slow.Skipped() != total-size {
		t.Fatalf("slow subscriber read %d, skipped %d", got.Len(), slow.Skipped())
	}
	if int64(fastGot.Len())+fast.Skipped() != total {
		t.Fatalf("fast subscriber: read %d + skipped %d != %d", fastGot.Len(), fast.Skipped(), total)
	}
}

func TestLogBufferNextHonoursContext(t *testing.T) {
	b := NewLogBuffer(16)
	s := b.Subscribe()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Next on an idle buffer: %v", err)
	}
}

func TestSecretsNeverPrinted(t *testing.T) {
	s := Spec{JobID: "j", Secrets: Secrets{"TOKEN": "hunter2"}}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if out := fmt.Sprintf(f, s); bytes.Contains([]byte(out), []byte("hunter2")) {
			t.Fatalf("%s printed the secret: %s", f, out)
		}
	}
}
