package data

import (
	"context"
	"crypto/rand"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// BenchmarkKeepOutputs keeps a job's outputs (a tar of the benchmark
// file, benchMiB) in a fresh on-disk store each round, as a provider does
// when a job ends: "plain" imports the tar as a directory (AddTarUntil,
// outputs before sealing), "sealed" checks it, encrypts it to a renter
// with age and imports the ciphertext (AddSealedTarUntil). The ratio of
// their MB/s is the cost of sealing (docs/PERFORMANCE.md).
//
//	go test -run '^$' -bench KeepOutputs -benchtime 5x ./node/data
func BenchmarkKeepOutputs(b *testing.B) {
	p, size := benchFile(b)
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	renter, err := peer.IDFromPrivateKey(k)
	if err != nil {
		b.Fatal(err)
	}
	to, err := PeerRecipient(renter)
	if err != nil {
		b.Fatal(err)
	}
	until := time.Now().Add(time.Hour)
	for _, mode := range []string{"plain", "sealed"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(size)
			stop := peakHeap(b)
			defer stop()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s, err := OpenStore(filepath.Join(b.TempDir(), strconv.Itoa(i)), 4*size)
				if err != nil {
					b.Fatal(err)
				}
				r := benchTar(p, size)
				b.StartTimer()
				var res TarResult
				if mode == "plain" {
					res, err = s.AddTarUntil(context.Background(), r, tarLimits, until)
				} else {
					res, err = s.AddSealedTarUntil(context.Background(), r, tarLimits, to, until)
				}
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if res.Bytes != size {
					b.Fatalf("kept %d bytes, want %d", res.Bytes, size)
				}
				r.Close()
				s.Close()
				b.StartTimer()
			}
		})
	}
}

// BenchmarkOpenOutputs writes kept outputs out as files, as `job fetch`
// does once the blocks are here: "plain" exports the directory DAG
// (Export), "sealed" decrypts the ciphertext file and writes its tar out
// (OpenSealed and ExtractTar).
//
//	go test -run '^$' -bench OpenOutputs -benchtime 5x ./node/data
func BenchmarkOpenOutputs(b *testing.B) {
	p, size := benchFile(b)
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	renter, _ := peer.IDFromPrivateKey(k)
	to, err := PeerRecipient(renter)
	if err != nil {
		b.Fatal(err)
	}
	id, err := KeyIdentity(k)
	if err != nil {
		b.Fatal(err)
	}
	s, err := OpenStore(filepath.Join(b.TempDir(), "blocks"), 4*size)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	plain, err := s.AddTarUntil(ctx, benchTar(p, size), tarLimits, until)
	if err != nil {
		b.Fatal(err)
	}
	sealed, err := s.AddSealedTarUntil(ctx, benchTar(p, size), tarLimits, to, until)
	if err != nil {
		b.Fatal(err)
	}
	for _, mode := range []string{"plain", "sealed"} {
		b.Run(mode, func(b *testing.B) {
			b.SetBytes(size)
			for i := 0; i < b.N; i++ {
				dst := filepath.Join(b.TempDir(), strconv.Itoa(i))
				if mode == "plain" {
					if err := Export(ctx, s.DAG(), plain.Root, dst, tarLimits); err != nil {
						b.Fatal(err)
					}
					continue
				}
				pt, err := OpenSealed(ctx, s.DAG(), sealed.Root, id)
				if err != nil {
					b.Fatal(err)
				}
				if res, err := ExtractTar(ctx, pt, dst, tarLimits); err != nil || res.Bytes != size {
					b.Fatalf("extracted %d bytes of %d: %v", res.Bytes, size, err)
				}
			}
		})
	}
}

// BenchmarkSealTar is sealing alone: the tar of the benchmark file checked
// and encrypted into nothing, no store. Against BenchmarkKeepOutputs it
// says how much of a provider's time on outputs is the cipher.
//
//	go test -run '^$' -bench SealTar -benchtime 5x ./node/data
func BenchmarkSealTar(b *testing.B) {
	p, size := benchFile(b)
	k, _, err := crypto.GenerateEd25519Key(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	renter, _ := peer.IDFromPrivateKey(k)
	to, err := PeerRecipient(renter)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	for i := 0; i < b.N; i++ {
		r := benchTar(p, size)
		var n countWriter
		var res TarResult
		if err := sealTar(context.Background(), r, &n, tarLimits, to, &res); err != nil {
			b.Fatal(err)
		}
		r.Close()
		if res.Bytes != size || int64(n) < size {
			b.Fatalf("sealed %d bytes into %d, want %d", res.Bytes, n, size)
		}
	}
}
