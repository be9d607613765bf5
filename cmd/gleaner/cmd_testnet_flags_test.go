package main

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestParseWorkloads(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr string // a part of the error; "" for none
	}{
		{in: "batch,service", want: []string{"batch", "service"}},
		{in: defaultTestnetWorkloads, want: []string{"batch", "service"}},
		{in: " service , batch ", want: []string{"service", "batch"}},
		{in: "batch", want: []string{"batch"}},
		{in: "batch,", want: []string{"batch"}},
		{in: "batch,gpu", wantErr: `unknown workload "gpu" (valid: batch, service)`},
		{in: "Service", wantErr: `unknown workload "Service" (valid: batch, service)`},
		{in: "batch,batch", wantErr: `"batch" given twice`},
		{in: "", wantErr: "name at least one of batch, service"},
		{in: " , ", wantErr: "name at least one of batch, service"},
	} {
		got, err := parseWorkloads(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseWorkloads(%q) = %v, %v; want an error with %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseWorkloads(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestTestnetNetworkFlag(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"lab-1", true},
		{"0", true},
		{"local", true},
		{"testnet", true},
		{"a" + strings.Repeat("b", 31), true}, // 32 characters, the most
		{"a" + strings.Repeat("b", 32), false},
		{"-lab", false},
		{"Lab", false},
		{"lab_1", false},
		{"lab.1", false},
		{"mainnet", false}, // reserved for the public network to come
	} {
		got, err := testnetNetwork(tc.in)
		if tc.ok && (err != nil || got != tc.in) {
			t.Errorf("testnetNetwork(%q) = %q, %v; want it accepted", tc.in, got, err)
		}
		if !tc.ok && err == nil {
			t.Errorf("testnetNetwork(%q) = %q; want an error", tc.in, got)
		}
	}
	// Left out: a fresh private name per run, valid by the p2p rule.
	valid := regexp.MustCompile(`^tn-[0-9a-f]{6}$`)
	a, errA := testnetNetwork("")
	b, errB := testnetNetwork("")
	if errA != nil || errB != nil || !valid.MatchString(a) || !valid.MatchString(b) || a == b {
		t.Fatalf("default networks %q (%v), %q (%v): want two different tn-XXXXXX names", a, errA, b, errB)
	}
}
