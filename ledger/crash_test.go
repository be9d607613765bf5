package ledger

import (
	"bufio"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
)

// crashChildEnv makes the test binary act as an appender that prints the
// sequence number of every acknowledged (returned) append, until killed.
const crashChildEnv = "GLEANER_LEDGER_CRASH_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashChildEnv); dir != "" {
		crashChild(dir)
		return
	}
	os.Exit(m.Run())
}

func crashChild(dir string) {
	raw, err := os.ReadFile(filepath.Join(dir, "key"))
	if err != nil {
		os.Exit(3)
	}
	key, err := crypto.UnmarshalPrivateKey(raw)
	if err != nil {
		os.Exit(3)
	}
	st, err := OpenStore(filepath.Join(dir, "ledger.db"))
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(4)
	}
	id := authorOf(key)
	var prev *Entry
	if h, ok, _ := st.Head(id); ok {
		prev, _, _ = st.Get(h.CID)
	}
	out := bufio.NewWriter(os.Stdout)
	for {
		e, se, err := NewEntry(key, prev, TypeOutcome, make([]byte, 512), time.Now())
		if err != nil {
			os.Exit(5)
		}
		if err := st.Append(se); err != nil {
			os.Exit(6)
		}
		fmt.Fprintln(out, e.Seq) // acknowledged: Append returned
		out.Flush()
		prev = e
	}
}

// TestKill9DuringAppendsLosesNothingAcknowledged kills an appending
// process with SIGKILL 50 times at random moments: after each crash the
// store opens cleanly, holds every entry that was acknowledged, and its
// chain verifies from the first entry to the head.
func TestKill9DuringAppendsLosesNothingAcknowledged(t *testing.T) {
	if testing.Short() {
		t.Skip("crash loop")
	}
	dir := t.TempDir()
	key, _, _ := crypto.GenerateEd25519Key(rand.Reader)
	raw, _ := crypto.MarshalPrivateKey(key)
	if err := os.WriteFile(filepath.Join(dir, "key"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var acked uint64
	for round := 0; round < 50; round++ {
		cmd := exec.Command(exe, "-test.run", "^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan uint64, 1024)
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if n, err := strconv.ParseUint(sc.Text(), 10, 64); err == nil {
					lines <- n
				}
			}
			close(lines)
		}()
		// Once it acknowledges its first append (a loaded machine or the
		// race detector can make a child slow to start), let it append for
		// a random 0-60 ms more, then pull the plug.
		select {
		case n, ok := <-lines:
			if ok {
				acked = max(acked, n)
			}
		case <-time.After(20 * time.Second):
		}
		var b [1]byte
		_, _ = rand.Read(b[:])
		time.Sleep(time.Duration(int(b[0])%60) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		for n := range lines {
			acked = max(acked, n)
		}

		st, err := OpenStore(filepath.Join(dir, "ledger.db"))
		if err != nil {
			t.Fatalf("round %d: the store does not open after kill -9: %v", round, err)
		}
		h, ok, err := st.Head(authorOf(key))
		if err != nil || (acked > 0 && (!ok || h.Seq < acked)) {
			st.Close()
			t.Fatalf("round %d: head %+v (ok %v, %v) after %d acknowledged appends", round, h, ok, err, acked)
		}
		if ok {
			entries, err := st.Range(authorOf(key), 1, h.Seq)
			if err != nil || uint64(len(entries)) != h.Seq {
				st.Close()
				t.Fatalf("round %d: %d entries for head %d: %v", round, len(entries), h.Seq, err)
			}
			for i, se := range entries {
				raw, _ := se.Marshal()
				e, _, err := DecodeSignedEntry(raw)
				if err != nil || e.Seq != uint64(i+1) || (i > 0 && e.Prev != entries[i-1].CID().String()) {
					st.Close()
					t.Fatalf("round %d: entry %d corrupt or unchained: %v", round, i+1, err)
				}
			}
			acked = h.Seq // what survived is the base of the next round
		}
		st.Close()
	}
	if acked == 0 {
		t.Fatal("no append was ever acknowledged: the crash loop tested nothing")
	}
	t.Logf("50 crashes, %d entries, none lost", acked)
}

func authorOf(key crypto.PrivKey) string {
	id, err := peer.IDFromPrivateKey(key)
	if err != nil {
		panic(err)
	}
	return id.String()
}
