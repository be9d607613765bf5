package node

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/repo"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/miekg/dns"
	madns "github.com/multiformats/go-multiaddr-dns"
)

// dnsaddrServer answers TXT queries for _dnsaddr.<name> on loopback UDP
// with the records it is given once ready is set, and SERVFAIL before:
// a name server that is down when a node starts.
type dnsaddrServer struct {
	records []string
	ready   atomic.Bool
	queries atomic.Int64
	addr    string
}

func startDNSAddrServer(t testing.TB, name string, records []string) *dnsaddrServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &dnsaddrServer{records: records, addr: pc.LocalAddr().String()}
	want := dns.Fqdn("_dnsaddr." + name)
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		s.queries.Add(1)
		m := new(dns.Msg)
		m.SetReply(q)
		switch {
		case !s.ready.Load():
			m.Rcode = dns.RcodeServerFailure
		case len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeTXT && strings.EqualFold(q.Question[0].Name, want):
			for _, r := range s.records {
				m.Answer = append(m.Answer, &dns.TXT{Hdr: dns.RR_Header{Name: want, Rrtype: dns.TypeTXT, Class: dns.ClassINET, Ttl: 60}, Txt: []string{r}})
			}
		default:
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

// resolver sends every query to the server.
func (s *dnsaddrServer) resolver(t testing.TB) *madns.Resolver {
	t.Helper()
	r, err := madns.NewResolver(madns.WithDefaultResolver(&net.Resolver{PreferGo: true,
		Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "udp", s.addr)
		}}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startBootstrapping starts a node whose only bootstrap entry is
// /dnsaddr/<name>, resolved through r.
func startBootstrapping(t testing.TB, ctx context.Context, name string, r *madns.Resolver) *Node {
	t.Helper()
	return startNodeWith(t, ctx, func(c *repo.Config) { c.P2P.Bootstrap = []string{"/dnsaddr/" + name} }, Options{DNSResolver: r})
}

// A node started while its bootstrap name does not resolve says why in
// node_info, keeps trying, and joins once DNS answers, through the
// /dnsaddr TXT records of a DNS server on loopback.
func TestBootstrapThroughDNSRetries(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	boot := startTestNode(t, ctx, "", Options{})
	var records []string
	for _, a := range boot.host.Addrs() {
		records = append(records, "dnsaddr="+a.String()+"/p2p/"+boot.host.ID().String())
	}
	dnsSrv := startDNSAddrServer(t, "boot.gleaner.test", records)
	n := startBootstrapping(t, ctx, "boot.gleaner.test", dnsSrv.resolver(t))

	info := func() InfoResult {
		r, err := nodeAPI{n}.Info(ctx, struct{}{})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	waitFor(t, 20*time.Second, "node_info to say why bootstrap failed", func() bool {
		b := info().Bootstrap
		return b != nil && !b.Connected && b.Tries >= 1 && strings.Contains(b.LastError, "did not resolve") && !b.NextTry.IsZero()
	})
	if n.host.LibP2P().Network().Connectedness(boot.host.ID()) == network.Connected {
		t.Fatal("connected to the bootstrap peer although its name never resolved")
	}
	dnsSrv.ready.Store(true)
	waitFor(t, 20*time.Second, "the node to reach the bootstrap peer once DNS answers", func() bool {
		b := info().Bootstrap
		return b.Connected && n.host.LibP2P().Network().Connectedness(boot.host.ID()) == network.Connected
	})
	if b := info().Bootstrap; b.Tries < 2 || b.LastError != "" || b.Resolved == 0 {
		t.Errorf("status after joining: %+v", b)
	}
}

// BenchmarkDNSBootstrap is a node's start to its first bootstrap peer,
// through /dnsaddr records served on loopback: the "under 1 s".
func BenchmarkDNSBootstrap(b *testing.B) {
	ctx := context.Background()
	boot := startTestNode(b, ctx, "", Options{})
	var records []string
	for _, a := range boot.host.Addrs() {
		records = append(records, "dnsaddr="+a.String()+"/p2p/"+boot.host.ID().String())
	}
	dnsSrv := startDNSAddrServer(b, "boot.gleaner.test", records)
	dnsSrv.ready.Store(true)
	r := dnsSrv.resolver(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := startBootstrapping(b, ctx, "boot.gleaner.test", r)
		for n.host.LibP2P().Network().Connectedness(boot.host.ID()) != network.Connected {
			time.Sleep(5 * time.Millisecond)
		}
		b.StopTimer()
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		_ = n.Stop(sctx)
		cancel()
		b.StartTimer()
	}
}
