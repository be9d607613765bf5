package p2p

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 4096, 4097, 1 << 16, DefaultMaxFrame} {
		p := bytes.Repeat([]byte{0xab}, n)
		var buf bytes.Buffer
		if err := WriteFrame(&buf, p, DefaultMaxFrame); err != nil {
			t.Fatalf("n=%d: write: %v", n, err)
		}
		// a second frame behind the first proves ReadFrame does not read ahead
		if err := WriteFrame(&buf, []byte("next"), DefaultMaxFrame); err != nil {
			t.Fatal(err)
		}
		got, err := ReadFrame(&buf, DefaultMaxFrame)
		if err != nil || !bytes.Equal(got, p) {
			t.Fatalf("n=%d: got %d bytes, err %v", n, len(got), err)
		}
		if got, err := ReadFrame(&buf, DefaultMaxFrame); err != nil || string(got) != "next" {
			t.Fatalf("n=%d: second frame %q, %v", n, got, err)
		}
		if _, err := ReadFrame(&buf, DefaultMaxFrame); err != io.EOF {
			t.Fatalf("n=%d: want io.EOF at end, got %v", n, err)
		}
	}
}

func TestFrameErrors(t *testing.T) {
	cases := []struct {
		name string
		in   []byte
		max  int
		want error
	}{
		{"empty stream", nil, 10, io.EOF},
		{"truncated varint", []byte{0x80}, 10, io.ErrUnexpectedEOF},
		{"truncated payload", []byte{3, 'a', 'b'}, 10, io.ErrUnexpectedEOF},
		{"header only", []byte{3}, 10, io.ErrUnexpectedEOF},
		{"too large", []byte{11}, 10, ErrFrameTooLarge},
		{"huge claim", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, DefaultMaxFrame, ErrFrameTooLarge},
		{"non-minimal zero", []byte{0x80, 0x00}, 10, errBadVarint},
		{"non-minimal one", []byte{0x81, 0x00, 'x'}, 10, errBadVarint},
		{"overflow", []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, 10, errBadVarint},
		{"too long", bytes.Repeat([]byte{0x80}, 11), 10, errBadVarint},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ReadFrame(bytes.NewReader(c.in), c.max)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	if err := WriteFrame(io.Discard, make([]byte, 11), 10); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("write over max: %v", err)
	}
}

// A peer claiming a 2^60-byte frame must not make us allocate it; the length
// check has to come before make().
func TestReadFrameNoAllocBeyondMax(t *testing.T) {
	hdr := []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range 100 {
		if _, err := ReadFrame(bytes.NewReader(hdr), 1<<10); !errors.Is(err, ErrFrameTooLarge) {
			t.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	if d := after.TotalAlloc - before.TotalAlloc; d > 1<<20 {
		t.Fatalf("allocated %d bytes for rejected frames", d)
	}
}

func FuzzReadFrame(f *testing.F) {
	for _, s := range [][]byte{{}, {0}, {1, 'a'}, {0x80, 0x01}, {0x80, 0x00}, {5, 'h', 'e', 'l', 'l', 'o'},
		{0xff, 0xff, 0xff, 0xff, 0x0f}, {0x81, 0x01}, bytes.Repeat([]byte{0xff}, 12)} {
		f.Add(s)
	}
	const max = 256
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		p, err := ReadFrame(r, max)
		if err != nil {
			return
		}
		if len(p) > max {
			t.Fatalf("frame of %d bytes over max %d", len(p), max)
		}
		// Accepted input must be the unique (minimal) encoding of p.
		consumed := data[:len(data)-r.Len()]
		var buf bytes.Buffer
		if err := WriteFrame(&buf, p, max); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), consumed) {
			t.Fatalf("accepted %x, canonical encoding is %x", consumed, buf.Bytes())
		}
	})
}
