package gangnet

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Every member reaches every rank, itself included, through the addresses
// in its GLEANER_GANG_PEERS, and data flows both ways on each connection:
// the sender's payload arrives whole (its digest comes back) and the
// receiver's answer returns. With two members and with three, all pairs at
// once.
func TestGangMembersExchangeThroughPeers(t *testing.T) {
	for _, size := range []int{2, 3} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			rig := newGangRig(t, ctx, "train-"+strconv.Itoa(size), size, testLimits())
			cs, ms := rig.join(t)

			var wg sync.WaitGroup
			errs := make(chan error, size*size)
			for i, m := range ms {
				env := m.Env()
				if env[EnvRank] != strconv.Itoa(i) || env[EnvSize] != strconv.Itoa(size) || env[EnvGang] != rig.roster.Gang {
					t.Fatalf("rank %d env %v", i, env)
				}
				peers := strings.Split(env[EnvPeers], ",")
				if len(peers) != size || peers[i] != cs[i].addr.String() {
					t.Fatalf("rank %d: %s=%q, want %d entries with its own port %s at %d", i, EnvPeers, env[EnvPeers], size, cs[i].addr, i)
				}
				for j, addr := range peers {
					if j != i && addr == cs[j].addr.String() {
						t.Fatalf("rank %d reaches rank %d directly at %s, not through its provider", i, j, addr)
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						payload := make([]byte, 256<<10+i*1000+j)
						_, _ = rand.Read(payload)
						got, err := exchange(addr, i, payload)
						if want := fmt.Sprintf("rank %d got %s\n", j, digest(payload)); err != nil || got != want {
							errs <- fmt.Errorf("rank %d -> rank %d via %s: answer %q, %v; want %q", i, j, addr, got, err, want)
						}
					}()
				}
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			for j, c := range cs {
				got := c.received()
				slices.Sort(got)
				var want []string
				for i := range size {
					want = append(want, fmt.Sprintf("from %d", i))
				}
				if !slices.Equal(got, want) {
					t.Errorf("rank %d's container received %v, want %v", j, got, want)
				}
			}
			for i, p := range rig.provs {
				if st := p.net.Stats(); st.Refused != 0 || st.Gangs != 1 {
					t.Errorf("provider %d: %+v", i, st)
				}
			}
		})
	}
}
