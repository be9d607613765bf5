package sim

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// The availability traces and fits of availability_fits.json.
const (
	TraceMicrosoft99 = "Microsoft99" // corporate desktops: long up periods
	TraceNd07cpu     = "Nd07cpu"     // a campus Condor pool: short, frequent ones
	AvailMixed       = "mixed"       // each provider drawn from one of the two
	AvailAlways      = "always"      // one window over the whole horizon

	FitWeibull     = "weibull"
	FitLognormal   = "lognormal"
	FitGamma       = "gamma"
	FitExponential = "exponential"
)

// minWindow is the shortest idle window a provider offers: shorter ones
// are not worth an auction.
const minWindow = 600

// availFile is availability_fits.json; durations are in hours.
type availFile struct {
	Unit   string               `json:"unit"`
	Traces map[string]traceFits `json:"traces"`
}

type traceFits struct {
	What        string `json:"what"`
	Exponential struct {
		UpMean   float64 `json:"up_mean"`
		DownMean float64 `json:"down_mean"`
	} `json:"exponential"`
	Weibull struct {
		Up, Down shapeScale
	} `json:"weibull"`
	Lognormal struct {
		Up, Down muSigma
	} `json:"lognormal"`
	Gamma struct {
		Up, Down shapeScale
	} `json:"gamma"`
}

type shapeScale struct {
	Shape float64 `json:"shape"`
	Scale float64 `json:"scale"`
}

type muSigma struct {
	Mu    float64 `json:"mu"`
	Sigma float64 `json:"sigma"`
}

// durationDist draws a period's length in hours.
type durationDist interface {
	draw(r *rand.Rand) float64
	mean() float64
}

type expDist struct{ m float64 }
type weibullDist shapeScale
type lognormalDist muSigma
type gammaDist shapeScale

func (d expDist) draw(r *rand.Rand) float64 { return d.m * r.ExpFloat64() }
func (d expDist) mean() float64             { return d.m }

// Inverse transform: F^-1(u) = scale * (-ln(1-u))^(1/shape).
func (d weibullDist) draw(r *rand.Rand) float64 {
	return d.Scale * math.Pow(r.ExpFloat64(), 1/d.Shape)
}
func (d weibullDist) mean() float64 { return d.Scale * math.Gamma(1+1/d.Shape) }

func (d lognormalDist) draw(r *rand.Rand) float64 { return math.Exp(d.Mu + d.Sigma*r.NormFloat64()) }
func (d lognormalDist) mean() float64             { return math.Exp(d.Mu + d.Sigma*d.Sigma/2) }

func (d gammaDist) draw(r *rand.Rand) float64 { return d.Scale * gammaUnit(r, d.Shape) }
func (d gammaDist) mean() float64             { return d.Shape * d.Scale }

// gammaUnit draws Gamma(k, 1) by Marsaglia and Tsang's method; for k < 1
// it draws Gamma(k+1, 1) and scales by U^(1/k), the usual boost (the fits
// have shapes 0.28..0.46).
func gammaUnit(r *rand.Rand, k float64) float64 {
	if k < 1 {
		return gammaUnit(r, k+1) * math.Pow(1-r.Float64(), 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := r.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := 1 - r.Float64()
		if math.Log(u) < 0.5*x*x+d-d*v+d*math.Log(v) {
			return d * v
		}
	}
}

// upDown is one trace's fitted up and down distributions.
type upDown struct{ up, down durationDist }

// loadAvailability reads availability_fits.json and returns the chosen
// fit of each trace.
func loadAvailability(dir, fit string) (map[string]upDown, error) {
	dir, err := TraceDir(dir)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, availFitsFile)
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f availFile
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Unit != "hours" {
		return nil, fmt.Errorf("%s: unit %q, expected \"hours\"", path, f.Unit)
	}
	out := map[string]upDown{}
	for _, name := range []string{TraceMicrosoft99, TraceNd07cpu} {
		t, ok := f.Traces[name]
		if !ok {
			return nil, fmt.Errorf("%s: no trace %q", path, name)
		}
		var ud upDown
		switch fit {
		case FitExponential:
			ud = upDown{expDist{t.Exponential.UpMean}, expDist{t.Exponential.DownMean}}
		case FitWeibull:
			ud = upDown{weibullDist(t.Weibull.Up), weibullDist(t.Weibull.Down)}
		case FitLognormal:
			ud = upDown{lognormalDist(t.Lognormal.Up), lognormalDist(t.Lognormal.Down)}
		case FitGamma:
			ud = upDown{gammaDist(t.Gamma.Up), gammaDist(t.Gamma.Down)}
		default:
			return nil, fmt.Errorf("fit %q: expected weibull, lognormal, gamma or exponential", fit)
		}
		if m := ud.up.mean(); !(m > 0) || math.IsInf(m, 0) || !(ud.down.mean() > 0) {
			return nil, fmt.Errorf("%s: %s %s fit has non-positive or missing parameters", path, name, fit)
		}
		out[name] = ud
	}
	return out, nil
}

// sampleWindows alternates up (offered) and down periods over [0, horizon)
// seconds. The process starts in a random phase: up with the long-run
// share of up time, part-way through its first period (a uniform point of
// it; the stationary residual would be length-biased, which we ignore).
// Windows are clipped to the horizon, touching ones merged, and those under
// minWindow dropped.
func sampleWindows(r *rand.Rand, ud upDown, horizon int64) []Span {
	seconds := func(d durationDist) int64 {
		s := int64(math.Round(d.draw(r) * 3600))
		return max(s, 1) // time always advances
	}
	up := r.Float64() < ud.up.mean()/(ud.up.mean()+ud.down.mean())
	first := seconds(ud.down)
	if up {
		first = seconds(ud.up)
	}
	t := -int64(r.Float64() * float64(first))
	end := t + first
	var out []Span
	for t < horizon {
		if up {
			s := Span{max(t, 0), min(end, horizon)}
			if n := len(out); n > 0 && out[n-1].End >= s.Start {
				out[n-1].End = s.End
			} else if s.End > s.Start {
				out = append(out, s)
			}
		}
		up = !up
		t = end
		if up {
			end = t + seconds(ud.up)
		} else {
			end = t + seconds(ud.down)
		}
	}
	kept := out[:0]
	for _, w := range out {
		if w.Len() >= minWindow {
			kept = append(kept, w)
		}
	}
	return kept
}
