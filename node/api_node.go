package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gleaner-net/gleaner/node/peers"
	"github.com/gleaner-net/gleaner/node/replicate"
	"github.com/gleaner-net/gleaner/node/rpc"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"
)

// Application error codes of the node namespace. They are part of the API
// contract and listed in docs/RPC.md; never renumber one.
const (
	CodeDialFailed   = -32010 // the peer could not be reached at any address
	CodeNotConnected = -32011 // the operation needs a live connection to the peer
	CodePeerNotFound = -32012 // the DHT knows no address for the peer
	CodePingFailed   = -32013 // the peer is connected but did not answer ping
)

var (
	errDialFailed   = &rpc.Error{Code: CodeDialFailed, Message: "could not connect to the peer"}
	errNotConnected = &rpc.Error{Code: CodeNotConnected, Message: "not connected to that peer"}
	errPeerNotFound = &rpc.Error{Code: CodePeerNotFound, Message: "no address known for that peer"}
	errPingFailed   = &rpc.Error{Code: CodePingFailed, Message: "the peer did not answer ping"}
)

// InfoResult is node_info's result.
type InfoResult struct {
	PeerID       string    `json:"peer_id"`
	Addrs        []string  `json:"addrs"`
	Version      string    `json:"version"`
	Network      string    `json:"network"`
	StartedAt    time.Time `json:"started_at"`
	UptimeSec    float64   `json:"uptime_s"`
	Reachability string    `json:"reachability"`
	Peers        int       `json:"peers"`
	// Bootstrap is how reaching the bootstrap list went; absent on a
	// network without one (local).
	Bootstrap *peers.BootstrapStatus `json:"bootstrap,omitempty"`
}

// PeerResult describes one connected peer.
type PeerResult struct {
	PeerID    string   `json:"peer_id"`
	Addrs     []string `json:"addrs"`
	Direction string   `json:"direction"`
	LatencyMS float64  `json:"latency_ms"`
	Transport string   `json:"transport"`
}

// ConnectParams are node_connect's parameters.
type ConnectParams struct {
	Addr string `json:"addr"`
}

// Validate rejects anything but a multiaddr that names a peer.
func (p ConnectParams) Validate() error {
	_, err := parsePeerAddr(p.Addr)
	return err
}

// ConnectResult is node_connect's result.
type ConnectResult struct {
	PeerID string `json:"peer_id"`
}

// PeerParams name one peer by ID.
type PeerParams struct {
	Peer string `json:"peer"`
}

// Validate rejects malformed peer IDs.
func (p PeerParams) Validate() error {
	_, err := parsePeerID(p.Peer)
	return err
}

// PingParams are node_ping's parameters.
type PingParams struct {
	Peer  string `json:"peer"`
	Count int    `json:"count,omitempty"`
}

// Validate checks the peer ID and bounds count (default 1).
func (p PingParams) Validate() error {
	if _, err := parsePeerID(p.Peer); err != nil {
		return err
	}
	if p.Count < 0 || p.Count > 20 {
		return fmt.Errorf("count %d: use 1 to 20", p.Count)
	}
	return nil
}

// PingResult reports each round trip.
type PingResult struct {
	PeerID string    `json:"peer_id"`
	RTTsMS []float64 `json:"rtts_ms"`
	AvgMS  float64   `json:"avg_ms"`
}

// PeerEventResult is one event of the node_peerEvents subscription.
type PeerEventResult struct {
	Type   string    `json:"type"`
	PeerID string    `json:"peer_id"`
	Addr   string    `json:"addr,omitempty"`
	Time   time.Time `json:"time"`
}

// OK is the result of methods that only succeed or fail.
type OK struct {
	OK bool `json:"ok"`
}

type nodeAPI struct{ n *Node }

func registerNodeAPI(s *rpc.Server, n *Node) {
	a := nodeAPI{n}
	rpc.Register(s, "node_info", rpc.MethodDoc{
		Summary: "Identity, addresses, version, network, uptime and NAT reachability of this node.",
	}, a.Info)
	rpc.Register(s, "node_peers", rpc.MethodDoc{
		Summary: "The peers this node is connected to.",
	}, a.Peers)
	rpc.Register(s, "node_connect", rpc.MethodDoc{
		Summary:     "Connect to a peer by multiaddr.",
		Description: "addr must end in /p2p/<peer-id>, e.g. /ip4/127.0.0.1/tcp/4030/p2p/12D3KooW...",
		ParamNames:  []string{"addr"},
		Errors:      []*rpc.Error{errDialFailed},
	}, a.Connect)
	rpc.Register(s, "node_disconnect", rpc.MethodDoc{
		Summary:    "Close every connection to a peer.",
		ParamNames: []string{"peer"},
		Errors:     []*rpc.Error{errNotConnected},
	}, a.Disconnect)
	rpc.Register(s, "node_ping", rpc.MethodDoc{
		Summary:     "Measure round-trip time to a peer with the libp2p ping protocol.",
		Description: "Connects first (looking the peer up in the DHT) when not connected. count defaults to 1, at most 20.",
		ParamNames:  []string{"peer", "count"},
		Errors:      []*rpc.Error{errPeerNotFound, errDialFailed, errPingFailed},
	}, a.Ping)
	rpc.RegisterSubscription(s, "node_peerEvents", rpc.MethodDoc{
		Summary: "Subscribe (WebSocket only) to peer connect and disconnect events.",
	}, a.PeerEvents)
}

func (a nodeAPI) Info(ctx context.Context, _ struct{}) (InfoResult, error) {
	h := a.n.host
	return InfoResult{
		PeerID:       h.ID().String(),
		Addrs:        addrStrings(h.Addrs()),
		Version:      Version,
		Network:      h.Network(),
		StartedAt:    a.n.started.UTC().Truncate(time.Millisecond),
		UptimeSec:    time.Since(a.n.started).Round(time.Millisecond).Seconds(),
		Reachability: h.Reachability(),
		Peers:        len(h.Peers()),
		Bootstrap:    a.n.bootStatus(),
	}, nil
}

func (a nodeAPI) Peers(ctx context.Context, _ struct{}) ([]PeerResult, error) {
	ps := a.n.host.Peers()
	out := make([]PeerResult, 0, len(ps))
	for _, p := range ps {
		out = append(out, PeerResult{
			PeerID:    p.ID.String(),
			Addrs:     addrStrings(p.Addrs),
			Direction: p.Direction,
			LatencyMS: ms(p.Latency),
			Transport: p.Transport,
		})
	}
	return out, nil
}

func (a nodeAPI) Connect(ctx context.Context, p ConnectParams) (ConnectResult, error) {
	ai, err := parsePeerAddr(p.Addr)
	if err != nil {
		return ConnectResult{}, err
	}
	if ai.ID == a.n.host.ID() {
		return ConnectResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: "that address is this node itself"}
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := a.n.host.ConnectNow(ctx, *ai); err != nil {
		return ConnectResult{}, withData(errDialFailed, err)
	}
	// Compare ledgers even if the peer was connected already: a user
	// connecting by hand often does so after an outage the connection
	// survived, when nothing else would make the two sides compare.
	go func() {
		rctx, cancel := context.WithTimeout(context.Background(), replicate.SyncTimeout)
		defer cancel()
		_ = a.n.feeds.Reconcile(rctx, ai.ID)
	}()
	return ConnectResult{PeerID: ai.ID.String()}, nil
}

func (a nodeAPI) Disconnect(ctx context.Context, p PeerParams) (OK, error) {
	id, _ := parsePeerID(p.Peer)
	if err := a.n.host.Disconnect(id); err != nil {
		return OK{}, withData(errNotConnected, err)
	}
	return OK{OK: true}, nil
}

func (a nodeAPI) Ping(ctx context.Context, p PingParams) (PingResult, error) {
	id, _ := parsePeerID(p.Peer)
	if id == a.n.host.ID() {
		return PingResult{}, &rpc.Error{Code: rpc.CodeInvalidParams, Message: "cannot ping this node itself"}
	}
	count := max(p.Count, 1)
	ctx, cancel := context.WithTimeout(ctx, time.Duration(count)*10*time.Second)
	defer cancel()
	if err := a.ensureConnected(ctx, id); err != nil {
		return PingResult{}, err
	}
	res := PingResult{PeerID: id.String()}
	var sum time.Duration
	for i := 0; i < count; i++ {
		rtt, err := a.n.host.Ping(ctx, id)
		if err != nil {
			return PingResult{}, withData(errPingFailed, err)
		}
		sum += rtt
		res.RTTsMS = append(res.RTTsMS, ms(rtt))
	}
	res.AvgMS = ms(sum / time.Duration(count))
	return res, nil
}

// ensureConnected dials a peer that is not connected, looking its
// addresses up in the DHT when the peerstore has none.
func (a nodeAPI) ensureConnected(ctx context.Context, id peer.ID) error {
	h := a.n.host
	if h.LibP2P().Network().Connectedness(id) == network.Connected {
		return nil
	}
	ai := peer.AddrInfo{ID: id, Addrs: h.LibP2P().Peerstore().Addrs(id)}
	if len(ai.Addrs) == 0 {
		found, err := h.DHT().FindPeer(ctx, id)
		if err != nil {
			return withData(errPeerNotFound, err)
		}
		ai = found
	}
	if err := h.Connect(ctx, ai); err != nil {
		return withData(errDialFailed, err)
	}
	return nil
}

func (a nodeAPI) PeerEvents(ctx context.Context, _ struct{}) (<-chan PeerEventResult, error) {
	in, err := a.n.host.SubscribePeerEvents(ctx)
	if err != nil {
		return nil, err
	}
	out := make(chan PeerEventResult, 16)
	go func() {
		defer close(out)
		for ev := range in {
			r := PeerEventResult{Type: ev.Type, PeerID: ev.Peer.String(), Time: ev.Time.UTC()}
			if ev.Addr != nil {
				r.Addr = ev.Addr.String()
			}
			select {
			case out <- r:
			case <-ctx.Done():
				return
			}
		}
	}()
	return out, nil
}

func parsePeerID(s string) (peer.ID, error) {
	if s == "" {
		return "", errors.New("peer: a peer ID is required (see `gleaner peers`)")
	}
	id, err := peer.Decode(s)
	if err != nil {
		return "", fmt.Errorf("peer %q is not a peer ID: %v", s, err)
	}
	return id, nil
}

func parsePeerAddr(s string) (*peer.AddrInfo, error) {
	if s == "" {
		return nil, errors.New("addr: a multiaddr is required, e.g. /ip4/127.0.0.1/tcp/4030/p2p/12D3KooW...")
	}
	m, err := ma.NewMultiaddr(s)
	if err != nil {
		return nil, fmt.Errorf("addr %q is not a multiaddr: %v", s, err)
	}
	ai, err := peer.AddrInfoFromP2pAddr(m)
	if err != nil {
		return nil, fmt.Errorf("addr %q must end in /p2p/<peer-id>", s)
	}
	return ai, nil
}

func withData(e *rpc.Error, cause error) *rpc.Error {
	return &rpc.Error{Code: e.Code, Message: e.Message + ": " + cause.Error()}
}

func addrStrings(as []ma.Multiaddr) []string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.String()
	}
	return out
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
