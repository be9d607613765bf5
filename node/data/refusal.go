package data

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ipfs/go-cid"
	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
)

// ErrRefused is wrapped by a fetch that every peer asked refused to
// serve: the data is private to the nodes that hold it (served only to
// the peers their owners authorised), or no peer holds it.
var ErrRefused = errors.New("refused: no peer asked serves this data to this node")

// Bitswap answers a refused want exactly as a missing block, and a
// broadcast want not at all, so a fetcher would wait out its whole
// timeout. The access protocol asks a peer the one question that
// matters, "will you serve me root?", and is answered "ok" or "refused";
// a peer that lacks root answers "refused" too, so a stranger learns
// nothing of what a node holds.

// AccessProtocol is the access question's protocol under a network's
// prefix.
func AccessProtocol(prefix protocol.ID) protocol.ID { return prefix + "/data-access/1.0.0" }

const (
	accessOK      = "ok"
	accessRefused = "refused"
	// maxAccessLine bounds a question (a CID's string form) and an answer.
	maxAccessLine = 256
	// accessTimeout bounds one question and its answer.
	accessTimeout = 5 * time.Second
)

// ServeAccess answers the access question on h: "ok" when a may send p
// root and has holds it.
func ServeAccess(h host.Host, prefix protocol.ID, a *Access, has func(context.Context, cid.Cid) bool) {
	h.SetStreamHandler(AccessProtocol(prefix), func(s network.Stream) {
		defer s.Close()
		_ = s.SetDeadline(time.Now().Add(accessTimeout))
		line, err := readLine(s)
		if err != nil {
			_ = s.Reset()
			return
		}
		answer := accessRefused
		if c, err := cid.Decode(line); err == nil && a.may(s.Conn().RemotePeer(), c) && has(context.Background(), c) {
			answer = accessOK
		}
		_, _ = io.WriteString(s, answer+"\n")
	})
}

// may is Allow without counting a refusal.
func (a *Access) may(p peer.ID, c cid.Cid) bool {
	k := keyOf(c)
	a.mu.RLock()
	defer a.mu.RUnlock()
	if a.public[k] > 0 {
		return true
	}
	pa := a.peers[p]
	return pa != nil && pa.blocks[k] > 0
}

func readLine(r io.Reader) (string, error) {
	br := bufio.NewReaderSize(io.LimitReader(r, maxAccessLine), maxAccessLine)
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(line), nil
}

// AskAccess asks p whether it serves root to this node: true for "ok",
// false for "refused", an error when p does not answer (an older node
// that does not speak the protocol, or one unreachable).
func AskAccess(ctx context.Context, h host.Host, prefix protocol.ID, p peer.ID, root cid.Cid) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, accessTimeout)
	defer cancel()
	s, err := h.NewStream(ctx, p, AccessProtocol(prefix))
	if err != nil {
		return false, err
	}
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(accessTimeout))
	if _, err := io.WriteString(s, root.String()+"\n"); err != nil {
		_ = s.Reset()
		return false, err
	}
	_ = s.CloseWrite()
	line, err := readLine(s)
	if err != nil {
		return false, err
	}
	switch line {
	case accessOK:
		return true, nil
	case accessRefused:
		return false, nil
	}
	return false, fmt.Errorf("access answer %q", line)
}

// refuseCheckAfter is how long a fetch runs before its sources are asked
// whether they serve it at all: a fetch that is served has its first
// blocks by then and is never asked about.
const refuseCheckAfter = time.Second

// maxAsked bounds the peers one fetch asks.
const maxAsked = 32

// FetchFrom is Fetch that ends early, with an error wrapping ErrRefused,
// when the data is not served to this node: once the fetch has run
// refuseCheckAfter without its root, it asks sources (none: the peers
// connected now and, with a router, up to 8 the router names for root)
// the access question, and when every one that answered refused and
// none said ok, it stops with an error that names them. A peer that does
// not answer the question keeps the fetch waiting, as before, for ctx.
func (x *Exchange) FetchFrom(ctx context.Context, root cid.Cid, sources []peer.ID, progress func(FetchProgress)) (FetchResult, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
			return
		case <-time.After(refuseCheckAfter):
		}
		if has, _ := x.store.Blockstore().Has(ctx, root); has {
			return
		}
		if err := x.askSources(ctx, root, sources); err != nil {
			cancel(err)
		}
	}()
	res, err := x.Fetch(ctx, root, progress)
	if cause := context.Cause(ctx); err != nil && errors.Is(cause, ErrRefused) {
		return res, fmt.Errorf("fetch %s: %w", root, cause)
	}
	return res, err
}

// askSources asks the access question and returns the refusal, or nil
// when some peer serves root or the answers say nothing for sure.
func (x *Exchange) askSources(ctx context.Context, root cid.Cid, sources []peer.ID) error {
	ask := map[peer.ID]bool{}
	for _, p := range sources {
		if p != x.host.ID() && len(ask) < maxAsked {
			ask[p] = true
		}
	}
	if len(sources) == 0 {
		for _, p := range x.host.Network().Peers() {
			if len(ask) < maxAsked {
				ask[p] = true
			}
		}
		if x.router != nil {
			fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			for ai := range x.router.FindProvidersAsync(fctx, root, 8) {
				if ai.ID != x.host.ID() && len(ask) < maxAsked {
					x.host.Peerstore().AddAddrs(ai.ID, ai.Addrs, time.Minute)
					ask[ai.ID] = true
				}
			}
			cancel()
		}
	}
	if len(ask) == 0 {
		return nil
	}
	var (
		mu      sync.Mutex
		refused []string
		unsure  bool
		wg      sync.WaitGroup
	)
	for p := range ask {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := AskAccess(ctx, x.host, x.prefix, p, root)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil || ok:
				unsure = true
			default:
				refused = append(refused, p.String())
			}
		}()
	}
	wg.Wait()
	if unsure || len(refused) == 0 || ctx.Err() != nil {
		return nil
	}
	sort.Strings(refused)
	return fmt.Errorf("%w (asked %s): %s is private to the nodes that hold it (served only to the peers their owners authorised: a lease's provider, a job's renter, or anyone once published with data add --public), or no peer holds it",
		ErrRefused, strings.Join(refused, ", "), root)
}
