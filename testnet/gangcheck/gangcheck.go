// Package gangcheck is the test workload's gang mode (demojob -gang): each
// member listens on its own entry of GLEANER_GANG_PEERS, connects to every
// entry (its own included), sends a payload, and checks the digest each
// rank sends back; it ends once it has reached every rank and heard from
// every rank. It imports nothing of the node, so that the image and the
// gang network's tests run the same code.
package gangcheck

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// PayloadSize is what each member sends each rank.
const PayloadSize = 1 << 20

// Config is one member's view of its gang.
type Config struct {
	Rank, Size int
	Peers      []string     // host:port per rank
	Listen     net.Listener // nil: listen on every interface at the own entry's port
	Out        io.Writer    // progress lines
}

// FromEnv reads GLEANER_GANG_RANK, GLEANER_GANG_SIZE and GLEANER_GANG_PEERS.
func FromEnv(getenv func(string) string, out io.Writer) (Config, error) {
	c := Config{Out: out}
	var err error
	if c.Rank, err = strconv.Atoi(getenv("GLEANER_GANG_RANK")); err != nil {
		return c, fmt.Errorf("GLEANER_GANG_RANK: %v", err)
	}
	if c.Size, err = strconv.Atoi(getenv("GLEANER_GANG_SIZE")); err != nil {
		return c, fmt.Errorf("GLEANER_GANG_SIZE: %v", err)
	}
	c.Peers = strings.Split(getenv("GLEANER_GANG_PEERS"), ",")
	if len(c.Peers) != c.Size || c.Rank < 0 || c.Rank >= c.Size {
		return c, fmt.Errorf("rank %d of %d with %d peers %q", c.Rank, c.Size, len(c.Peers), c.Peers)
	}
	return c, nil
}

// payload is what from sends to to: distinct per pair, so a connection
// delivered to the wrong rank shows.
func payload(from, to int) []byte {
	b := make([]byte, PayloadSize)
	seed := sha256.Sum256([]byte(fmt.Sprintf("gang %d->%d", from, to)))
	for i := range b {
		b[i] = seed[i%len(seed)] ^ byte(i/len(seed))
	}
	return b
}

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Run is one member's whole check, until ctx ends.
func Run(ctx context.Context, c Config) error {
	ln := c.Listen
	if ln == nil {
		_, port, err := net.SplitHostPort(c.Peers[c.Rank])
		if err != nil {
			return fmt.Errorf("own entry %q: %v", c.Peers[c.Rank], err)
		}
		if ln, err = net.Listen("tcp", ":"+port); err != nil {
			return err
		}
	}
	defer ln.Close()
	heard := make(chan int, 4*c.Size)
	go serve(ln, c.Rank, heard)

	var wg sync.WaitGroup
	var outMu sync.Mutex // c.Out need not be safe for concurrent writes
	errs := make([]error, c.Size)
	for k, addr := range c.Peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[k] = reach(ctx, addr, c.Rank, k)
			if errs[k] == nil {
				outMu.Lock()
				fmt.Fprintf(c.Out, "gang rank %d: reached rank %d at %s\n", c.Rank, k, addr)
				outMu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	from := map[int]bool{}
	for len(from) < c.Size {
		select {
		case r := <-heard:
			from[r] = true
		case <-ctx.Done():
			return fmt.Errorf("rank %d heard from %d of %d ranks: %w", c.Rank, len(from), c.Size, ctx.Err())
		}
	}
	fmt.Fprintf(c.Out, "gang rank %d: reached all %d ranks and heard from all\n", c.Rank, c.Size)
	return nil
}

// serve answers each connection with the rank's name and the digest of
// what arrived, and reports the sender's rank.
func serve(ln net.Listener, rank int, heard chan<- int) {
	for {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(time.Minute))
			br := bufio.NewReader(conn)
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			from, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(line), "from "))
			if err != nil {
				return
			}
			sum := sha256.New()
			if _, err := io.Copy(sum, io.LimitReader(br, 2*PayloadSize)); err != nil {
				return
			}
			if _, err := fmt.Fprintf(conn, "rank %d got %s\n", rank, hex.EncodeToString(sum.Sum(nil))); err == nil {
				select {
				case heard <- from:
				default:
				}
			}
		}()
	}
}

// reach exchanges with rank to at addr, retrying while to's container is
// not up yet (its provider refuses, so the connection closes unanswered).
func reach(ctx context.Context, addr string, from, to int) error {
	want := fmt.Sprintf("rank %d got %s\n", to, digest(payload(from, to)))
	var last error
	for {
		got, err := exchange(ctx, addr, from, payload(from, to))
		switch {
		case err == nil && got == want:
			return nil
		case err == nil:
			return fmt.Errorf("rank %d -> rank %d at %s: answer %q, want %q", from, to, addr, got, want)
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("rank %d -> rank %d at %s: %v (last: %v)", from, to, addr, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func exchange(ctx context.Context, addr string, from int, p []byte) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := fmt.Fprintf(conn, "from %d\n", from); err != nil {
		return "", err
	}
	if _, err := conn.Write(p); err != nil {
		return "", err
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		return "", err
	}
	b, err := io.ReadAll(io.LimitReader(conn, 256))
	if err == nil && len(b) == 0 {
		err = io.ErrUnexpectedEOF // refused on the far side: closed unanswered
	}
	return string(b), err
}
