package p2p

import (
	"testing"
	"time"

	rcmgr "github.com/libp2p/go-libp2p/p2p/host/resource-manager"
)

func systemConns(l rcmgr.ConcreteLimitConfig) (in, all int) {
	s := l.ToPartialLimitConfig().System
	return int(s.ConnsInbound), int(s.Conns)
}

// TestRelayLimitsHoldReservations: at the default budget a node admits 96
// inbound connections (libp2p's scaling), fewer than a relay's 128
// reservations; a --relay node admits its reservations and a margin
// besides, keeps its outbound room, never promises more than half its
// file descriptors, and keeps libp2p's figure where that is already more.
func TestRelayLimitsHoldReservations(t *testing.T) {
	for _, tc := range []struct {
		name             string
		memory           int64
		fd               int
		plainIn, relayIn int
	}{
		{"default budget", defaultMaxMemory, defaultMaxFD, 96, RelayMaxReservations + relayConnMargin},
		{"few descriptors", defaultMaxMemory, 200, 96, 100},     // half of 200
		{"very few descriptors", defaultMaxMemory, 128, 96, 96}, // never below libp2p's own
		{"large budget", 8 << 30, 8192, 576, 576},               // libp2p's scaling already gives more
	} {
		t.Run(tc.name, func(t *testing.T) {
			plainIn, plainAll := systemConns(resourceLimits(tc.memory, tc.fd, false))
			relayIn, relayAll := systemConns(resourceLimits(tc.memory, tc.fd, true))
			if plainIn != tc.plainIn {
				t.Errorf("a plain node admits %d inbound connections, want libp2p's %d", plainIn, tc.plainIn)
			}
			if relayIn != tc.relayIn {
				t.Errorf("a relay admits %d inbound connections, want %d", relayIn, tc.relayIn)
			}
			if relayAll-relayIn != plainAll-plainIn {
				t.Errorf("a relay's outbound room is %d connections, a plain node's %d", relayAll-relayIn, plainAll-plainIn)
			}
			if tc.fd == defaultMaxFD && relayIn < RelayMaxReservations+relayConnMargin/2 {
				t.Errorf("a relay at the default budget admits %d inbound connections, fewer than its %d reservations and a margin", relayIn, RelayMaxReservations)
			}
			cfg := &config{connHigh: defaultConnHigh, relayService: true}
			if hw := connHighWater(cfg, resourceLimits(tc.memory, tc.fd, true)); hw < relayAll {
				t.Errorf("the relay's connection manager trims above %d connections, below its limit of %d: it would close reservations", hw, relayAll)
			}
			cfg.relayService = false
			if hw := connHighWater(cfg, resourceLimits(tc.memory, tc.fd, false)); hw != defaultConnHigh {
				t.Errorf("a plain node's high water is %d, want its own %d", hw, defaultConnHigh)
			}
		})
	}
}

// TestRelayCircuitLimitsConfigurable: p2p.relay_circuit_* reach the
// relay's per-circuit limits; zero keeps the defaults.
func TestRelayCircuitLimitsConfigurable(t *testing.T) {
	if l := relayResources(0, 0).Limit; l.Duration != RelayCircuitDuration || l.Data != RelayCircuitData {
		t.Errorf("default circuit limits %v, %d bytes; want %v, %d", l.Duration, l.Data, RelayCircuitDuration, RelayCircuitData)
	}
	if l := relayResources(5*time.Second, 1<<20).Limit; l.Duration != 5*time.Second || l.Data != 1<<20 {
		t.Errorf("configured circuit limits %v, %d bytes; want 5s, 1 MiB", l.Duration, l.Data)
	}
	if _, err := newConfig([]Option{RelayCircuitLimits(-time.Second, 0)}); err == nil {
		t.Error("a negative circuit duration is accepted")
	}
}
