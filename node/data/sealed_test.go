package data

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"filippo.io/age"
	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

func ed25519Key(t testing.TB) (crypto.PrivKey, peer.ID) {
	t.Helper()
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	id, err := peer.IDFromPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return k, id
}

// tarOf is a tar stream of src as a provider copies an outputs volume.
func tarOf(t testing.TB, src string) []byte {
	t.Helper()
	b, err := io.ReadAll(tarTreeForTest(t, src))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSealedOutputs: outputs sealed to a renter's peer ID are ciphertext
// in the provider's store (no file's bytes appear in any block), the
// renter's key opens them to exactly the files written, another node's
// key cannot, and a flipped byte of the ciphertext fails the opening.
func TestSealedOutputs(t *testing.T) {
	src := testTree(t)
	s := openStore(t, t.TempDir(), 1<<30)
	renterKey, renter := ed25519Key(t)
	otherKey, _ := ed25519Key(t)
	to, err := PeerRecipient(renter)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := s.AddSealedTarUntil(ctx, bytes.NewReader(tarOf(t, src)), testLimits, to, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if res.Files != 5 {
		t.Errorf("sealed %d files, want 5", res.Files)
	}
	if until, ok, _ := s.PinExpiry(ctx, res.Root); !ok || until.IsZero() {
		t.Errorf("the sealed outputs are not pinned until the retention's end: %v %v", until, ok)
	}
	if sealed, err := IsSealed(ctx, s.DAG(), res.Root); err != nil || !sealed {
		t.Fatalf("IsSealed: %v %v", sealed, err)
	}
	// No block holds a recognisable piece of any file.
	probe := []byte(noise(11, 6*ChunkSize))[1000:1064]
	readme := []byte("inputs for the exchange test")
	keys, err := s.Blockstore().AllKeysChan(ctx)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for c := range keys {
		b, err := s.Blockstore().Get(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b.RawData(), probe) || bytes.Contains(b.RawData(), readme) {
			t.Fatalf("block %s holds plaintext", c)
		}
		n++
	}
	if n == 0 {
		t.Fatal("no blocks stored")
	}

	// The renter opens them.
	id, err := KeyIdentity(renterKey)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := OpenSealed(ctx, s.DAG(), res.Root, id)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	got, err := ExtractTar(ctx, pt, out, testLimits)
	if err != nil {
		t.Fatal(err)
	}
	if got.Files != res.Files || got.Bytes != res.Bytes {
		t.Errorf("extracted %d files, %d bytes; sealed %d, %d", got.Files, got.Bytes, res.Files, res.Bytes)
	}
	plain, err := s.Add(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	sameTree(t, s, plain, src)

	// Another node cannot.
	otherID, err := KeyIdentity(otherKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSealed(ctx, s.DAG(), res.Root, otherID); err == nil || !strings.Contains(err.Error(), "another node's key") {
		t.Errorf("another key opened the outputs: %v", err)
	}

	// A tampered ciphertext does not open to anything.
	var buf bytes.Buffer
	if err := sealTar(ctx, bytes.NewReader(tarOf(t, src)), &buf, testLimits, to, &TarResult{}); err != nil {
		t.Fatal(err)
	}
	ct := buf.Bytes()
	ct[len(ct)/2] ^= 1
	dec, err := openAgeForTest(bytes.NewReader(ct), renterKey)
	if err == nil {
		_, err = ExtractTar(ctx, dec, filepath.Join(t.TempDir(), "bad"), testLimits)
	}
	if err == nil {
		t.Error("a tampered ciphertext opened without error")
	}

	// A hostile provider's sealed stream that goes on after its tar ends
	// is read no further than a tar's padding.
	var long bytes.Buffer
	w, err := age.Encrypt(&long, to)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = w.Write(tarOf(t, src))
	_, _ = w.Write(make([]byte, 1<<20))
	_ = w.Close()
	dec, err = openAgeForTest(&long, renterKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ExtractTar(ctx, dec, filepath.Join(t.TempDir(), "long"), testLimits); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a sealed stream with 1 MiB after its tar: %v, want ErrTooLarge", err)
	}

	// A hostile tar is refused before anything is sealed.
	var hostile bytes.Buffer
	tw := tar.NewWriter(&hostile)
	_ = tw.WriteHeader(&tar.Header{Name: "../escape", Typeflag: tar.TypeReg, Size: 1, Mode: 0o644})
	_, _ = tw.Write([]byte("x"))
	_ = tw.Close()
	if _, err := s.AddSealedTarUntil(ctx, &hostile, testLimits, to, time.Now().Add(time.Hour)); !errors.Is(err, ErrUnsafePath) {
		t.Errorf("a tar entry ../escape: %v, want ErrUnsafePath", err)
	}
}

// tarTreeForTest writes src as a tar with Docker's "./" names.
func tarTreeForTest(t testing.TB, src string) io.Reader {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		hdr.Name = "./" + filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

func openAgeForTest(r io.Reader, k crypto.PrivKey) (io.Reader, error) {
	id, err := KeyIdentity(k)
	if err != nil {
		return nil, err
	}
	return age.Decrypt(r, id)
}
