package testnet

import (
	"encoding/json"
	"io"
	"testing"
	"time"
)

// awaitDaemonReady reads a daemon's ready line (the first JSON value it
// writes on stdout, {"peer_id": ...}) within 30 s and returns the
// peer ID, then drains stdout so the daemon never blocks on it; what names
// the daemon in a failure, whose message carries logText's log.
func awaitDaemonReady(t testing.TB, stdout io.Reader, what string, logText func() string) string {
	t.Helper()
	type ready struct {
		peerID string
		err    error
	}
	got := make(chan ready, 1)
	go func() {
		var ev struct {
			PeerID string `json:"peer_id"`
		}
		err := json.NewDecoder(stdout).Decode(&ev)
		got <- ready{ev.PeerID, err}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case r := <-got:
		if r.err != nil {
			t.Fatalf("%s did not start: %v\n%s", what, r.err, logText())
		}
		return r.peerID
	case <-time.After(30 * time.Second):
		t.Fatalf("%s not ready after 30 s\n%s", what, logText())
	}
	return ""
}
