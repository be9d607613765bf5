package testnet

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gleaner-net/gleaner/node/gangnet"
)

// A provider daemon of the emulated homes runs in a network namespace of
// its own, but Docker runs its containers on bridges in this machine's
// namespace: a service job's container (on its internal network,
// 172.16.0.0/12 from Docker's default pools) is out of the daemon's
// reach, as it never is on a real machine, where the daemon and Docker
// share the host's namespace. reachContainers puts it back within reach:
// in the provider's namespace, TCP connections to anywhere but the
// emulated networks (the public segment, the homes' LANs, loopback) are
// redirected (iptables REDIRECT in nat OUTPUT) to a listener
// of the test's made inside that namespace, which reads each
// connection's original destination (SO_ORIGINAL_DST) and joins it to a
// connection made from this machine's namespace, where the container is.
// Nothing else of the namespace changes: its p2p traffic still goes
// through its router's NAT.
//
// The homes' LANs are named one /24 each, not as 192.168.0.0/20: Docker's
// default pools hand out 192.168.0.0/20 once 172.17-31 are taken (15
// networks on the engine, which a busy CI engine can have), and a
// container there (192.168.0.2) must still be redirected, or its service
// is never ready.
var emulatedNets = []string{pubNet + ".0/24", "192.168.1.0/24", "192.168.2.0/24", "192.168.3.0/24", "192.168.4.0/24", "127.0.0.0/8"}

// reachContainers starts the redirect for the daemon in namespace ns, until
// the test ends.
func reachContainers(t testing.TB, ns string) {
	t.Helper()
	ln, err := gangnet.Netns("/var/run/netns/" + ns).Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	for _, n := range emulatedNets {
		nsRun(t, ns, "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-d", n, "-j", "RETURN")
	}
	nsRun(t, ns, "iptables", "-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-j", "REDIRECT", "--to-ports", port)
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	// What the redirect did, for a failed test's log.
	var joined, failed int
	var lastErr error
	note := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed++
			lastErr = err
		} else {
			joined++
		}
	}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			open[c] = true
		} else {
			delete(open, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				track(c, true)
				defer track(c, false)
				defer c.Close()
				dst, err := originalDst(c.(*net.TCPConn))
				if err != nil {
					note(err)
					return
				}
				up, err := net.DialTimeout("tcp", dst, 3*time.Second)
				note(err)
				if err != nil {
					return // the container does not listen (yet): the daemon sees the connection close
				}
				track(up, true)
				defer track(up, false)
				defer up.Close()
				splice(c.(*net.TCPConn), up.(*net.TCPConn))
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		if t.Failed() {
			t.Logf("%s: connections redirected to containers: %d joined, %d failed (the last: %v)", ns, joined, failed, lastErr)
		}
		for c := range open {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
}

// originalDst is where c was headed before iptables redirected it.
func originalDst(c *net.TCPConn) (string, error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return "", err
	}
	var addr string
	var gerr error
	err = rc.Control(func(fd uintptr) {
		// SO_ORIGINAL_DST fills a sockaddr_in; the IPv6 mreq getter is
		// the usual way to read 16 bytes of it: port at 2..3, address
		// at 4..7.
		m, err := unix.GetsockoptIPv6Mreq(int(fd), unix.SOL_IP, unix.SO_ORIGINAL_DST)
		if err != nil {
			gerr = err
			return
		}
		a := m.Multiaddr
		addr = net.JoinHostPort(net.IPv4(a[4], a[5], a[6], a[7]).String(), strconv.Itoa(int(a[2])<<8|int(a[3])))
	})
	if err == nil {
		err = gerr
	}
	if err != nil {
		return "", fmt.Errorf("SO_ORIGINAL_DST: %w", err)
	}
	return addr, nil
}

// splice copies both ways until both directions end, half-closing each
// side as the other's reading ends.
func splice(a, b *net.TCPConn) {
	done := make(chan struct{}, 2)
	cp := func(dst, src *net.TCPConn) {
		_, err := io.Copy(dst, src)
		if err == nil || errors.Is(err, io.EOF) {
			_ = dst.CloseWrite()
		} else {
			_ = dst.Close()
			_ = src.Close()
		}
		done <- struct{}{}
	}
	go cp(a, b)
	go cp(b, a)
	<-done
	<-done
}
