package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Each sampler's draws should average to the distribution's mean (the
// mean itself computed from the textbook formula).
func TestDurationSamplersMatchMeans(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, c := range []struct {
		name string
		d    durationDist
		want float64
	}{
		{"exponential", expDist{3}, 3},
		{"weibull k=0.6", weibullDist{Shape: 0.6, Scale: 2}, 2 * math.Gamma(1+1/0.6)},
		{"weibull k=2", weibullDist{Shape: 2, Scale: 1}, math.Sqrt(math.Pi) / 2},
		{"lognormal", lognormalDist{Mu: 0.5, Sigma: 0.8}, math.Exp(0.5 + 0.32)},
		{"gamma k=0.4", gammaDist{Shape: 0.4, Scale: 5}, 2},
		{"gamma k=3", gammaDist{Shape: 3, Scale: 0.5}, 1.5},
	} {
		if math.Abs(c.d.mean()-c.want) > 1e-9 {
			t.Errorf("%s: mean() %v, want %v", c.name, c.d.mean(), c.want)
		}
		const n = 200_000
		sum := 0.0
		for i := 0; i < n; i++ {
			x := c.d.draw(r)
			if !(x >= 0) {
				t.Fatalf("%s: drew %v", c.name, x)
			}
			sum += x
		}
		if got := sum / n; math.Abs(got-c.want) > 0.03*c.want {
			t.Errorf("%s: sample mean %.4f, want %.4f", c.name, got, c.want)
		}
	}
}

func TestSampleWindowsShape(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	// Windows stay inside the horizon, sorted, disjoint and at least
	// minWindow long, for long, very short and heavy-tailed periods, and
	// never offer more than the fit's share of time (dropping only lowers it).
	const horizon = 30 * 86400
	for _, ud := range []upDown{
		{expDist{2}, expDist{0.5}},
		{expDist{1.0 / 60}, expDist{0.001}},
		{weibullDist{Shape: 0.45, Scale: 4.16}, weibullDist{Shape: 0.51, Scale: 0.74}},
	} {
		var up int64
		ws := sampleWindows(r, ud, horizon)
		for i, w := range ws {
			if w.Start < 0 || w.End > horizon || w.Len() < minWindow || i > 0 && w.Start <= ws[i-1].End {
				t.Fatalf("%v: window %d %+v bad (previous %+v)", ud, i, w, ws[max(i-1, 0)])
			}
			up += w.Len()
		}
		want := ud.up.mean() / (ud.up.mean() + ud.down.mean())
		if got := float64(up) / horizon; got > want+0.1 {
			t.Errorf("%v: offered %.3f of the time, more than the fit's %.3f", ud, got, want)
		}
	}
	// Six-second up periods are all under the minimum window.
	if ws := sampleWindows(r, upDown{expDist{1.0 / 600}, expDist{1}}, horizon); len(ws) != 0 {
		t.Errorf("six-second up periods kept as %d windows", len(ws))
	}
}
