package data

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/ipfs/go-cid"
)

// A tree through WriteTar and back through AddTar keeps its CID: the CID
// a provider reports for a job's outputs is the one `gleaner data add`
// (and `ipfs add --cid-version=1`) gives for the same files.
func TestAddTarKeepsTheCID(t *testing.T) {
	ctx := context.Background()
	src := filepath.Join(t.TempDir(), "out")
	big := []byte(noise(5, 2*ChunkSize+5))
	writeFiles(t, src, map[string]string{"model/weights.bin": string(big), "metrics.json": "{}", "logs/empty": ""})
	st := openStore(t, filepath.Join(t.TempDir(), "store"), 1<<30)
	want, err := st.Add(ctx, src)
	if err != nil {
		t.Fatal(err)
	}
	var tb bytes.Buffer
	if err := WriteTar(ctx, st.DAG(), want, &tb, testLimits); err != nil {
		t.Fatal(err)
	}
	other := openStore(t, filepath.Join(t.TempDir(), "other"), 1<<30)
	res, err := other.AddTar(ctx, &tb, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Root.Equals(want) || res.Files != 3 || res.Bytes != int64(len(big)+2) {
		t.Fatalf("AddTar = %+v, want root %s, 3 files, %d bytes", res, want, len(big)+2)
	}
	if ok, _ := other.Pinned(ctx, res.Root); !ok {
		t.Error("AddTar did not pin its root")
	}
}

func TestAddTarRefusesHostileEntries(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "store"), 1<<30)
	for _, c := range []struct {
		name    string
		entries []tar.Header
		want    error
	}{
		{"dot-dot", []tar.Header{{Name: "../x", Typeflag: tar.TypeReg, Size: 1}}, ErrUnsafePath},
		{"nested dot-dot", []tar.Header{{Name: "a/../../x", Typeflag: tar.TypeReg, Size: 1}}, ErrUnsafePath},
		{"absolute", []tar.Header{{Name: "/etc/passwd", Typeflag: tar.TypeReg, Size: 1}}, ErrUnsafePath},
		{"file then dir", []tar.Header{{Name: "a", Typeflag: tar.TypeReg, Size: 1}, {Name: "a/b", Typeflag: tar.TypeReg, Size: 1}}, ErrUnsafePath},
		{"too large", []tar.Header{{Name: "big", Typeflag: tar.TypeReg, Size: testLimits.MaxBytes + 1}}, ErrTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			tw := tar.NewWriter(&b)
			for _, h := range c.entries {
				h := h
				h.Mode = 0o644
				if err := tw.WriteHeader(&h); err != nil {
					t.Fatal(err)
				}
				if h.Typeflag == tar.TypeReg && h.Size < 1<<20 {
					if _, err := tw.Write(bytes.Repeat([]byte("x"), int(h.Size))); err != nil {
						t.Fatal(err)
					}
				}
			}
			tw.Flush()
			_, err := st.AddTar(ctx, &b, testLimits)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	pins, _ := st.Pins(ctx)
	if len(pins) != 0 {
		t.Errorf("refused tars left pins %v", pins)
	}
	// Links are skipped and named, not followed and not fatal.
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	_ = tw.WriteHeader(&tar.Header{Name: "ok", Typeflag: tar.TypeReg, Size: 2, Mode: 0o644})
	_, _ = tw.Write([]byte("ok"))
	_ = tw.WriteHeader(&tar.Header{Name: "escape", Typeflag: tar.TypeSymlink, Linkname: "/etc/shadow"})
	tw.Close()
	res, err := st.AddTar(ctx, &b, testLimits)
	if err != nil || res.Files != 1 || len(res.Skipped) != 1 || res.Skipped[0] != "escape" {
		t.Fatalf("tar with a symlink: %+v, %v", res, err)
	}
}

func TestOutputPinsLapse(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	st := openStore(t, dir, 1<<30)
	mk := func(body string) *bytes.Buffer {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		_ = tw.WriteHeader(&tar.Header{Name: "result", Typeflag: tar.TypeReg, Size: int64(len(body)), Mode: 0o644})
		_, _ = tw.Write([]byte(body))
		tw.Close()
		return &b
	}
	now := time.Unix(1_800_000_000, 0)
	kept, err := st.AddTarUntil(ctx, mk("kept"), testLimits, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	gone, err := st.AddTarUntil(ctx, mk("gone"), testLimits, now.Add(-time.Second))
	if err != nil {
		t.Fatal(err)
	}
	// A lasting pin of the same root stays lasting.
	lasting, err := st.AddTar(ctx, mk("lasting"), testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddTarUntil(ctx, mk("lasting"), testLimits, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if until, ok, _ := st.PinExpiry(ctx, kept.Root); !ok || !until.Equal(now.Add(time.Hour)) {
		t.Errorf("kept's pin lapses at %v (pinned %v)", until, ok)
	}
	if got, err := st.LastingPins(ctx); err != nil || len(got) != 1 || !got[0].Equals(lasting.Root) {
		t.Fatalf("LastingPins = %v, %v; want only %s (the others lapse)", got, err, lasting.Root)
	}
	lapsed, err := st.ExpirePins(ctx, now)
	if err != nil || len(lapsed) != 1 || !lapsed[0].Equals(gone.Root) {
		t.Fatalf("ExpirePins = %v, %v; want only %s", lapsed, err, gone.Root)
	}
	for c, want := range map[cid.Cid]bool{kept.Root: true, lasting.Root: true, gone.Root: false} {
		if ok, _ := st.Pinned(ctx, c); ok != want {
			t.Errorf("%s pinned = %v, want %v", c, ok, want)
		}
	}
	// Across a reopen the expiry holds.
	st.Close()
	st = openStore(t, dir, 1<<30)
	if lapsed, _ := st.ExpirePins(ctx, now.Add(2*time.Hour)); len(lapsed) != 1 || !lapsed[0].Equals(kept.Root) {
		t.Errorf("after a reopen, ExpirePins = %v, want %s", lapsed, kept.Root)
	}
}
