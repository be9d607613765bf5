package executor

import (
	"context"
	"testing"
	"time"
)

// stopWithNotice: a notice sends SIGTERM and waits; no notice kills at
// once, without SIGTERM (an escaped job), and marks the result killed.
func TestStopWithNotice(t *testing.T) {
	for _, tc := range []struct {
		name      string
		notice    time.Duration
		exitsTerm bool // the job exits on SIGTERM
		want      string
		killed    bool
	}{
		{"notice, exits on term", time.Minute, true, "term", false},
		{"notice runs out", time.Millisecond, false, "term kill", true},
		{"no notice", 0, true, "kill", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var sent string
			signal := func(name string, exits bool) func() error {
				return func() error {
					if sent != "" {
						sent += " "
					}
					sent += name
					if exits {
						close(done)
					}
					return nil
				}
			}
			killed := false
			err := stopWithNotice(context.Background(), tc.notice, done,
				signal("term", tc.exitsTerm), signal("kill", !tc.exitsTerm || tc.notice <= 0),
				func() { killed = true })
			if err != nil || sent != tc.want || killed != tc.killed {
				t.Fatalf("err %v, sent %q, killed %v; want %q, killed %v", err, sent, killed, tc.want, tc.killed)
			}
		})
	}
}
