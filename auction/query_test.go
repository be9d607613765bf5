package auction

import (
	"errors"
	"math/rand"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseQueryValid(t *testing.T) {
	for in, want := range map[string]string{
		"":                                     "",
		"vram>=40":                             "vram >= 40",
		"  vram >= 40   gpus=2 ":               "vram >= 40 gpus = 2",
		"gpu in [H100,A100-80GB]":              "gpu in [H100,A100-80GB]",
		"gpu in [ H100 , a100-80gb ]":          "gpu in [H100,a100-80gb]",
		"gpu notin[RTX3060]":                   "gpu notin [RTX3060]",
		"price.bronze<=1.5 price.gold>0.25":    "price.bronze <= 1.5 price.gold > 0.25",
		"available>=4h max_duration>2d":        "available >= 4h max_duration > 2d",
		"free>=4h":                             "free >= 4h",
		"simulated=false workload!=service":    "simulated = false workload != service",
		"region=EU country in [de,FR] cc>=8.9": "region = EU country in [de,FR] cc >= 8.9",
		"cpus>8 memory>=64 gpus in [1,2,4]":    "cpus > 8 memory >= 64 gpus in [1,2,4]",
		"dataset=QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG": "dataset = QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG",
	} {
		q, err := ParseQuery(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if q.String() != want {
			t.Errorf("%q: got %q, want %q", in, q.String(), want)
		}
	}
}

func TestParseQueryInvalid(t *testing.T) {
	for in, want := range map[string]string{
		"vrma>=40":                    `column 1: unknown field "vrma" (fields: gpu, gpus, vram,`,
		"vram>=abc":                   `column 7: vram wants a decimal in GB`,
		"vram>=-1":                    "vram wants a decimal",
		"vram>=1.1234567":             "6 fractional digits",
		"gpu<H100":                    "gpu (string) does not support <; it supports = != in notin",
		"simulated>true":              "simulated (bool) does not support >",
		"simulated=yes":               "simulated wants true or false",
		"region=europe":               `"europe" is not a continent code`,
		"country=DEU":                 "not an ISO 3166-1 alpha-2 country code",
		"workload=training":           `"training" is not a workload (batch, service)`,
		"provider=bob":                `"bob" is not a peer ID`,
		"dataset=xyz":                 `"xyz" is not a CID`,
		"available>=4 hours":          "available wants a duration",
		"available>=1.5s":             "whole seconds",
		"gpus>=2.5":                   "gpus wants a whole number",
		"gpu in H100":                 "expected a list such as [a,b]",
		"gpu=[H100]":                  "lists need in or notin",
		"gpu in []":                   "expected a list value",
		"gpu in [H100,":               "expected a list value",
		"gpu in [H100 A100]":          "expected ',' or ']'",
		"vram":                        "missing operator",
		"vram>=":                      "missing value",
		"vram 40":                     "expected an operator",
		"vram==40":                    "'==' is not an operator",
		"vram!40":                     "'!' must be followed by '='",
		">=40":                        "expected a field name",
		"gpu=H100 gpu=H 100":          `unknown field "100"`,
		"gpu=H#100":                   "is not a GPU model",
		strings.Repeat("x", 5000):     "limit 4096",
		strings.Repeat("gpus=1 ", 65): "more than 64 clauses",
	} {
		_, err := ParseQuery(in)
		if err == nil || !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), want) {
			t.Errorf("%.40q: got %v, want %q", in, err, want)
		}
	}
}

func TestQuerySemantics(t *testing.T) {
	o := validOffer(fakeID(1), t0) // 2x H100 80 GB cc 9.0, simulated, DE/eu, silver 2, bronze 1.2, batch
	o.GPUs = append(o.GPUs, GPU{Model: "RTX3060", VRAMMiB: 12288, ComputeCap: "8.6"})
	o.Policy.MaxDurationSec = 0
	for q, want := range map[string]bool{
		"":                                 true,
		"gpu=h100":                         true, // case-insensitive
		"gpu=H100 gpus=2 vram>=80":         true, // 81559 MiB is 85.5 GB
		"gpus=3 vram<13":                   true, // no gpu clause: every GPU counts
		"gpu=H100 gpus>=3":                 false,
		"gpu notin [H100] gpus=1 cc=8.6":   true,
		"gpu=A100-80GB":                    false,
		"gpu=H100 gpu=RTX3060":             true, // each selects some ...
		"gpu=H100 gpu=RTX3060 gpus=0":      true, // ... together none
		"gpu=H100 gpu=RTX3060 vram>0":      false,
		"cc>=8.6 cc<9":                     true,
		"price.bronze<=1.2 price.silver=2": true,
		"price.gold>=0":                    false, // no gold tier: no price.gold clause matches
		"price.gold!=1":                    false,
		"region=eu country in [de,fr]":     true,
		"region!=eu":                       false,
		"simulated=true":                   true, // any simulated GPU makes it simulated
		"simulated!=true":                  false,
		"workload=batch":                   true,
		"workload!=service":                true,
		"workload in [service]":            false,
		"max_duration>=36500d":             true, // unlimited
		"available>=8h available<=8h":      true,
		"available>8h":                     false,
		"cpus=32 memory>=274 memory<275":   true, // 256 GiB = 274.9 GB
		"dataset=bafybeigdyrzt5sfp7udm7hu76uh7y26nf3efuylqabf3oclgtqy55fbzdi": true,
		"dataset=QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG":              false,
		"provider=" + fakeID(1):           true,
		"provider in [" + fakeID(2) + "]": false,
	} {
		pq, err := ParseQuery(q)
		if err != nil {
			t.Fatalf("%q: %v", q, err)
		}
		if got := pq.Match(o, t0); got != want {
			t.Errorf("%q: got %v, want %v", q, got, want)
		}
	}
	all, _ := ParseQuery("")
	if o.Withdrawn = true; all.Match(o, t0) {
		t.Error("withdrawn offer matched")
	}
	if o.Withdrawn = false; all.Match(o, t0.Add(2*3600e9)) {
		t.Error("expired offer matched")
	}
}

func TestBookQueryOrderAndExplain(t *testing.T) {
	b := NewBook(100, newClock().now)
	mk := func(n uint64, bronze Credits, vram int) {
		o := validOffer(fakeID(n), t0)
		o.Prices.Bronze = bronze
		for i := range o.GPUs {
			o.GPUs[i].VRAMMiB = vram
		}
		mustPut(t, b, o)
	}
	mk(1, 1_500_000, 81559)
	mk(2, 0, 40960) // no bronze tier
	mk(3, 900_000, 24576)
	mk(4, 1_100_000, 143771)
	q, _ := ParseQuery("vram>=24 price.bronze<=1.2")
	got, ex, err := b.Query(q, "price.bronze", 0)
	if err != nil || len(got) != 2 || got[0].Provider != fakeID(3) || got[1].Provider != fakeID(4) {
		t.Fatalf("got %v %v", got, err)
	}
	if ex.Considered != 4 || ex.Matched != 2 || ex.Clauses[0].Removed != 0 || ex.Clauses[1].Removed != 2 ||
		ex.Clauses[1].Clause != "price.bronze <= 1.2" || !strings.Contains(ex.String(), "2 removed by price.bronze <= 1.2") {
		t.Fatalf("explain %+v", ex)
	}
	all, _ := ParseQuery("")
	got, _, _ = b.Query(all, "-price.bronze", 3) // absent sorts last either way; limit applies after
	if len(got) != 3 || got[0].Provider != fakeID(1) || got[2].Provider != fakeID(3) {
		t.Fatalf("desc order: %v", got)
	}
	got, _, _ = b.Query(all, "-vram", 1)
	if got[0].Provider != fakeID(4) {
		t.Fatal("-vram")
	}
	for _, order := range []string{"nope", "gpu", "--vram"} {
		if _, _, err := b.Query(all, order, 0); !errors.Is(err, ErrBadQuery) || !strings.Contains(err.Error(), "orderable: gpus, vram") {
			t.Errorf("order %q: %v", order, err)
		}
	}
	if len(QueryFields()) != len(fields) || QueryFields()[0].Name != "gpu" {
		t.Error("QueryFields")
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"gpu in [H100,A100-80GB] vram>=40 region=eu gpus>=2 price.bronze<=1.5 available>=4h simulated=false",
		"vram>=", "gpu notin[a,b]", "cc>=8.9 max_duration>2d", "x!=[", "price.gold<0.000001"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			if !errors.Is(err, ErrBadQuery) {
				t.Fatalf("error not wrapping ErrBadQuery: %v", err)
			}
			return
		}
		again, err := ParseQuery(q.String())
		if err != nil || again.String() != q.String() {
			t.Fatalf("canonical form %q does not round-trip: %v", q.String(), err)
		}
		q.Match(validOffer(fakeID(1), t0), t0)
	})
}

// Books above minChunk are split across goroutines; the result and the
// Explain must equal one serial pass over the whole book.
func TestQueryParallelChunksAgree(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(3))
	c := newClock()
	b := NewBook(3*minChunk, c.now)
	r := rand.New(rand.NewSource(3))
	for i := 0; i < 3*minChunk; i++ {
		mustPut(t, b, randomOffer(r, fakeID(uint64(i)), t0.Unix()))
	}
	c.add(30 * time.Minute)
	q, _ := ParseQuery("vram>=24 region in [eu,na] available>=1h price.bronze<2")
	got, ex, _ := b.Query(q, "-price.bronze", 0)
	var serial queryPart
	serial.run(q, b.list, c.now().Unix(), nil)
	if ex.Matched != len(serial.matched) || ex.Expired != serial.ex.Expired || len(got) != ex.Matched || ex.Matched == 0 {
		t.Fatalf("parallel %+v, serial %+v", ex, serial.ex)
	}
	for i := range ex.Clauses {
		if ex.Clauses[i].Removed != serial.ex.Clauses[i].Removed {
			t.Fatalf("clause %d: parallel %d, serial %d", i, ex.Clauses[i].Removed, serial.ex.Clauses[i].Removed)
		}
	}
	for _, o := range got {
		if !q.Match(o, c.now()) {
			t.Fatalf("returned %s, which does not match", o.Provider)
		}
	}
}
