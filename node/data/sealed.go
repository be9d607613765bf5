package data

import (
	"archive/tar"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"filippo.io/age"
	"filippo.io/age/agessh"
	uio "github.com/ipfs/boxo/ipld/unixfs/io"
	"github.com/ipfs/go-cid"
	ipld "github.com/ipfs/go-ipld-format"
	"github.com/libp2p/go-libp2p/core/crypto"
	pb "github.com/libp2p/go-libp2p/core/crypto/pb"
	"github.com/libp2p/go-libp2p/core/peer"
	"golang.org/x/crypto/ssh"
)

// Sealed outputs.
//
// A job's outputs are the renter's alone. The provider seals them before
// a byte reaches its store: the tar stream of the outputs volume is
// checked entry by entry (as AddTar checks it: files and directories
// only, safe names, within the limits), encrypted with age
// (filippo.io/age) to the renter, and the ciphertext imported as one
// UnixFS file. Its CID is what the settlement signs and the ledger shows;
// it says nothing of the contents. The recipient is the renter's own
// libp2p identity, an ed25519 key that the lease's renter peer ID holds
// (age's ssh-ed25519 recipient type, agessh), so there is no new key to
// keep or to send: only the node that holds the renter's identity key
// can open them.
//
// Verified: the renter fetches blocks checked against the signed CID, so
// the ciphertext is the provider's; age authenticates every 64 KiB chunk
// of it and its end, so a plaintext that decrypts is exactly what the
// provider sealed, whole.

// ErrNotSealed is wrapped by OpenSealed of a DAG that is not age
// ciphertext: outputs a provider kept before sealing (a UnixFS directory).
var ErrNotSealed = errors.New("not sealed outputs")

// PeerRecipient is the age recipient of the node whose peer ID is p: its
// ed25519 public key, read from the ID itself.
func PeerRecipient(p peer.ID) (age.Recipient, error) {
	pub, err := p.ExtractPublicKey()
	if err != nil {
		return nil, fmt.Errorf("peer %s: its public key: %w", p, err)
	}
	if pub.Type() != pb.KeyType_Ed25519 {
		return nil, fmt.Errorf("peer %s has a %s key; outputs are sealed to ed25519 identities only", p, pub.Type())
	}
	raw, err := pub.Raw()
	if err != nil {
		return nil, err
	}
	sshPub, err := ssh.NewPublicKey(ed25519.PublicKey(raw))
	if err != nil {
		return nil, err
	}
	return agessh.NewEd25519Recipient(sshPub)
}

// KeyIdentity is the age identity of a node's libp2p ed25519 key: it
// opens what PeerRecipient of the node's peer ID sealed.
func KeyIdentity(k crypto.PrivKey) (age.Identity, error) {
	if k.Type() != pb.KeyType_Ed25519 {
		return nil, fmt.Errorf("a %s identity key cannot open sealed outputs; ed25519 only", k.Type())
	}
	raw, err := k.Raw()
	if err != nil {
		return nil, err
	}
	if len(raw) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("ed25519 key of %d bytes", len(raw))
	}
	return agessh.NewEd25519Identity(ed25519.PrivateKey(raw))
}

// AddSealedTarUntil seals the tar stream r to `to` and keeps the
// ciphertext as one UnixFS file pinned until until (unless pinned to
// last before). The result's Files, Bytes and Skipped count the
// plaintext's entries; its Root is the ciphertext's CID. Nothing of the
// plaintext is written anywhere.
func (s *Store) AddSealedTarUntil(ctx context.Context, r io.Reader, lim ExportLimits, to age.Recipient, until time.Time) (TarResult, error) {
	if lim.MaxBytes <= 0 || lim.MaxEntries <= 0 {
		return TarResult{}, fmt.Errorf("tar limits %+v: both must be positive", lim)
	}
	pr, pw := io.Pipe()
	var res TarResult
	sealed := make(chan error, 1)
	go func() {
		err := sealTar(ctx, r, pw, lim, to, &res)
		pw.CloseWithError(err)
		sealed <- err
	}()
	s.gcMu.RLock()
	defer s.gcMu.RUnlock()
	n, err := importReader(s.dag, pr, CIDv1)
	pr.CloseWithError(errors.New("import ended")) // stops the sealer if the import failed first
	if serr := <-sealed; serr != nil {
		return res, serr
	}
	if err != nil {
		return res, err
	}
	res.Root = n.Cid()
	key := pinPrefix.ChildString(res.Root.String())
	if v, err := s.db.Get(ctx, key); err == nil && len(v) == 0 {
		return res, nil // pinned to last already
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(until.Unix()))
	return res, s.db.Put(ctx, key, b[:])
}

// sealTar copies the files and directories of the tar r, checked as AddTar
// checks them, into a new tar encrypted to `to` on w.
func sealTar(ctx context.Context, r io.Reader, w io.Writer, lim ExportLimits, to age.Recipient, res *TarResult) error {
	enc, err := age.Encrypt(w, to)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(enc)
	err = eachTarEntry(ctx, r, lim, res, func(name string, h *tar.Header, body io.Reader) error {
		out := &tar.Header{Name: name, Mode: 0o644, ModTime: h.ModTime, Format: tar.FormatPAX}
		if h.Typeflag == tar.TypeDir {
			out.Typeflag, out.Name, out.Mode = tar.TypeDir, name+"/", 0o755
			return tw.WriteHeader(out)
		}
		out.Typeflag, out.Size = tar.TypeReg, h.Size
		if h.Mode&0o111 != 0 {
			out.Mode = 0o755
		}
		if err := tw.WriteHeader(out); err != nil {
			return err
		}
		_, err := io.Copy(tw, body)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return enc.Close()
}

// eachTarEntry reads the tar r and calls fn with each directory (other
// than the root) and regular file, its name checked (tarName) and relative
// to the root; other entries are counted in res.Skipped. lim bounds the
// entries and the file bytes.
func eachTarEntry(ctx context.Context, r io.Reader, lim ExportLimits, res *TarResult, fn func(name string, h *tar.Header, body io.Reader) error) error {
	tr := tar.NewReader(r)
	for entries := 0; ; entries++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the tar: %w", err)
		}
		if entries >= lim.MaxEntries {
			return fmt.Errorf("%w: more than %d entries", ErrTooLarge, lim.MaxEntries)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		name, err := tarName(h.Name)
		if err != nil {
			return err
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if name == "" {
				continue
			}
			if err := fn(name, h, nil); err != nil {
				return err
			}
		case tar.TypeReg:
			if name == "" {
				return fmt.Errorf("%w: a file entry named %q", ErrUnsafePath, h.Name)
			}
			if h.Size < 0 || h.Size > lim.MaxBytes-res.Bytes {
				return fmt.Errorf("%w: %s is %d bytes, %d left of %d", ErrTooLarge, name, h.Size, lim.MaxBytes-res.Bytes, lim.MaxBytes)
			}
			if err := fn(name, h, io.LimitReader(tr, h.Size)); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
			res.Files++
			res.Bytes += h.Size
		default:
			if len(res.Skipped) < maxSkippedNames {
				res.Skipped = append(res.Skipped, name)
			}
		}
	}
}

// IsSealed says whether the DAG under c is sealed outputs (a UnixFS file)
// rather than outputs kept in the clear (a directory).
func IsSealed(ctx context.Context, dag ipld.DAGService, c cid.Cid) (bool, error) {
	n, err := dag.Get(ctx, c)
	if err != nil {
		return false, err
	}
	return !isDir(n), nil
}

// OpenSealed streams the plaintext of the sealed file c, which id opens.
// Reading fails at the first chunk that does not authenticate, and at an
// end that is not the sealed stream's own.
func OpenSealed(ctx context.Context, dag ipld.DAGService, c cid.Cid, id age.Identity) (io.Reader, error) {
	n, err := dag.Get(ctx, c)
	if err != nil {
		return nil, err
	}
	if isDir(n) {
		return nil, fmt.Errorf("%s: %w (a directory)", c, ErrNotSealed)
	}
	r, err := uio.NewDagReader(ctx, n, dag)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", c, err)
	}
	pt, err := age.Decrypt(r, id)
	if err != nil {
		var none *age.NoIdentityMatchError
		if errors.As(err, &none) {
			return nil, fmt.Errorf("%s is sealed to another node's key: only the job's renter can open it: %w", c, err)
		}
		return nil, fmt.Errorf("%s: %w: %w", c, ErrNotSealed, err)
	}
	return pt, nil
}

// ExtractTar writes the files and directories of the tar r under the new
// directory dst, names checked as AddTar checks them (nothing is written
// outside dst; links and devices are skipped) and lim bounding the bytes
// and entries.
func ExtractTar(ctx context.Context, r io.Reader, dst string, lim ExportLimits) (TarResult, error) {
	var res TarResult
	if lim.MaxBytes <= 0 || lim.MaxEntries <= 0 {
		return res, fmt.Errorf("tar limits %+v: both must be positive", lim)
	}
	if err := os.Mkdir(dst, 0o755); err != nil {
		return res, err
	}
	err := eachTarEntry(ctx, r, lim, &res, func(name string, h *tar.Header, body io.Reader) error {
		p := filepath.Join(dst, filepath.FromSlash(name))
		if h.Typeflag == tar.TypeDir {
			return os.MkdirAll(p, 0o755)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if h.Mode&0o111 != 0 {
			mode = 0o755
		}
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
		if err != nil {
			return err
		}
		n, err := io.Copy(f, body)
		if err == nil && n != h.Size {
			err = fmt.Errorf("%d of %d bytes: %w", n, h.Size, io.ErrUnexpectedEOF)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	// The tar ends before the sealed stream does (its padding): read the
	// rest, so that age checks the stream's authenticated end, but no more
	// than a tar's padding: a hostile DAG may describe far more bytes.
	if err == nil {
		var n int64
		n, err = io.CopyN(io.Discard, r, maxTarTrailer+1)
		if errors.Is(err, io.EOF) {
			err = nil
		}
		if err == nil && n > maxTarTrailer {
			err = fmt.Errorf("%w: more than %d bytes after the tar's end", ErrTooLarge, maxTarTrailer)
		}
	}
	return res, err
}

// maxTarTrailer bounds what may follow a sealed tar's last entry: its
// end-of-archive blocks and record padding take at most 10 KiB.
const maxTarTrailer = 64 << 10
