package repo

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestRenderedConfigRoundTrips(t *testing.T) {
	for _, network := range []string{NetworkLocal, NetworkTestnet} {
		want := DefaultConfig(network)
		want.P2P.Bootstrap = []string{"/ip4/127.0.0.1/tcp/4030/p2p/12D3KooWGzh8ZGDbq8FWRzcBHPwSsjWJQRGxvSgNi3VQq3rzw6tK"}
		want.RPC.AllowedOrigins = []string{"https://dash.example:8443"}
		want.Metrics.Address = "127.0.0.1:4032"
		want.P2P.RelayCircuitS, want.P2P.RelayCircuitMB = 5, 8
		path := filepath.Join(t.TempDir(), ConfigFile)
		if err := os.WriteFile(path, []byte(want.Render()), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := LoadConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", network, got, want)
		}
	}
}

func TestConfigRejectsUnknownKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), ConfigFile)
	body := DefaultConfig(NetworkLocal).Render() + "\n[rpc2]\naddres = \"x\"\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := LoadConfig(path)
	if err == nil || !strings.Contains(err.Error(), "rpc2") {
		t.Fatalf("unknown key not reported: %v", err)
	}
}

func TestConfigValidateNamesTheField(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(*Config)
		field string
	}{
		{"network", func(c *Config) { c.Network = "Main Net" }, "network"},
		{"listen empty", func(c *Config) { c.P2P.Listen = nil }, "p2p.listen"},
		{"listen garbage", func(c *Config) { c.P2P.Listen = []string{"tcp:4030"} }, "p2p.listen"},
		{"bootstrap without peer", func(c *Config) { c.P2P.Bootstrap = []string{"/ip4/1.2.3.4/tcp/1"} }, "p2p.bootstrap"},
		{"dht mode", func(c *Config) { c.P2P.DHTMode = "fast" }, "p2p.dht_mode"},
		{"relay circuit seconds", func(c *Config) { c.P2P.RelayCircuitS = -1 }, "p2p.relay_circuit_s"},
		{"relay circuit a week", func(c *Config) { c.P2P.RelayCircuitS = 7 * 24 * 3600 }, "p2p.relay_circuit_s"},
		{"relay circuit data", func(c *Config) { c.P2P.RelayCircuitMB = MaxRelayCircuitMB + 1 }, "p2p.relay_circuit_mb"},
		{"rpc address", func(c *Config) { c.RPC.Address = "4031" }, "rpc.address"},
		{"rpc remote", func(c *Config) { c.RPC.Address = "0.0.0.0:4031" }, "rpc.address"},
		{"rpc origin without scheme", func(c *Config) { c.RPC.AllowedOrigins = []string{"dash.example:8443"} }, "rpc.allowed_origins"},
		{"rpc origin with a path", func(c *Config) { c.RPC.AllowedOrigins = []string{"https://dash.example/app"} }, "rpc.allowed_origins"},
		{"connections", func(c *Config) { c.Limits.ConnectionsHigh = 1 }, "limits"},
		{"memory", func(c *Config) { c.Limits.MaxMemoryMB = 1 }, "limits.max_memory_mb"},
		{"service firewall", func(c *Config) { c.Provider.ServiceFirewall = "no" }, "provider.service_firewall"},
	}
	for _, tc := range cases {
		c := DefaultConfig(NetworkLocal)
		tc.edit(&c)
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want an error starting with %q", tc.name, err, tc.field)
		}
	}
	c := DefaultConfig(NetworkLocal)
	c.RPC.Address, c.RPC.AllowRemote = "0.0.0.0:4031", true
	if err := c.Validate(); err != nil {
		t.Errorf("remote RPC with allow_remote: %v", err)
	}
	// "" is a config.toml from before the setting: the daemon's default.
	for _, v := range []string{"", ServiceFirewallAuto, ServiceFirewallOff} {
		c := DefaultConfig(NetworkLocal)
		c.Provider.ServiceFirewall = v
		if err := c.Validate(); err != nil {
			t.Errorf("provider.service_firewall %q: %v", v, err)
		}
	}
}

func TestBootstrapDefaults(t *testing.T) {
	if got := BootstrapFor(NetworkTestnet, nil); len(got) == 0 {
		t.Error("testnet has no built-in bootstrap list")
	}
	if got := BootstrapFor(NetworkLocal, nil); len(got) != 0 {
		t.Errorf("local network has bootstrap peers %v", got)
	}
	custom := []string{"/dnsaddr/example.org"}
	if got := BootstrapFor(NetworkTestnet, custom); !reflect.DeepEqual(got, custom) {
		t.Errorf("configured list not used: %v", got)
	}
	if _, err := ParseBootstrap(BootstrapFor(NetworkTestnet, nil)); err != nil {
		t.Errorf("built-in list does not parse: %v", err)
	}
}

// A config.toml written before the [data] section existed loads with the
// default quota; a quota that is present is validated, never replaced.
func TestDataQuotaDefaultsOnlyWhenAbsent(t *testing.T) {
	full := DefaultConfig(NetworkLocal).Render()
	cut := strings.Index(full, "[data]")
	if cut < 0 {
		t.Fatal("rendered config has no [data] section")
	}
	dir := t.TempDir()
	old := filepath.Join(dir, "old.toml")
	if err := os.WriteFile(old, []byte(full[:cut]), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(old)
	if err != nil {
		t.Fatal(err)
	}
	if c.Data.QuotaGiB != DefaultDataQuotaGiB {
		t.Errorf("quota of a config without [data] = %d, want %d", c.Data.QuotaGiB, DefaultDataQuotaGiB)
	}
	zero := filepath.Join(dir, "zero.toml")
	body := strings.Replace(full, fmt.Sprintf("quota_gib = %d", DefaultDataQuotaGiB), "quota_gib = 0", 1)
	if err := os.WriteFile(zero, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfig(zero); err == nil || !strings.Contains(err.Error(), "data.quota_gib") {
		t.Errorf("quota_gib = 0 accepted or not named: %v", err)
	}
}

func TestMetricsRefusesRemoteAddress(t *testing.T) {
	c := DefaultConfig(NetworkLocal)
	if c.Metrics.Address != "" {
		t.Fatalf("metrics on by default: %q", c.Metrics.Address)
	}
	for _, ok := range []string{"", "127.0.0.1:4032", "localhost:0", "[::1]:4032"} {
		c.Metrics.Address = ok
		if err := c.Validate(); err != nil {
			t.Errorf("metrics.address %q: %v", ok, err)
		}
	}
	for _, bad := range []string{"0.0.0.0:4032", "192.0.2.7:4032", ":4032"} {
		c.Metrics.Address, c.Metrics.AllowRemote = bad, false
		err := c.Validate()
		if err == nil || !strings.HasPrefix(err.Error(), "metrics.address") || !strings.Contains(err.Error(), "allow_remote") {
			t.Errorf("metrics.address %q without allow_remote: got %v", bad, err)
		}
		c.Metrics.AllowRemote = true
		if err := c.Validate(); err != nil {
			t.Errorf("metrics.address %q with allow_remote: %v", bad, err)
		}
	}
	for _, bad := range []string{"4032", "127.0.0.1:port", "127.0.0.1"} {
		c.Metrics.Address, c.Metrics.AllowRemote = bad, false
		if err := c.Validate(); err == nil || !strings.HasPrefix(err.Error(), "metrics.address") {
			t.Errorf("metrics.address %q: got %v, want an error naming metrics.address", bad, err)
		}
	}
	// A config file from before [metrics] existed loads with it off.
	path := filepath.Join(t.TempDir(), ConfigFile)
	body := strings.SplitN(DefaultConfig(NetworkLocal).Render(), "\n[metrics]", 2)[0]
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := LoadConfig(path)
	if err != nil || got.Metrics != (MetricsConfig{}) {
		t.Fatalf("config without [metrics]: %+v, %v", got.Metrics, err)
	}
}

// The input bounds: defaults where a config predates them, rendered with
// the rest, and a bad value refused naming its key.
func TestDataInputBounds(t *testing.T) {
	full := DefaultConfig(NetworkLocal).Render()
	for _, line := range []string{fmt.Sprintf("max_job_input_gib = %d", DefaultMaxJobInputGiB), fmt.Sprintf("disk_reserve_gib = %d", DefaultDiskReserveGiB)} {
		if !strings.Contains(full, "\n"+line+"\n") {
			t.Errorf("the rendered config lacks %q", line)
		}
	}
	dir := t.TempDir()
	// A [data] section from before the keys: the defaults.
	var kept []string
	for _, l := range strings.Split(full, "\n") {
		if !strings.HasPrefix(l, "max_job_input_gib") && !strings.HasPrefix(l, "disk_reserve_gib") {
			kept = append(kept, l)
		}
	}
	old := filepath.Join(dir, "old.toml")
	if err := os.WriteFile(old, []byte(strings.Join(kept, "\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(old)
	if err != nil {
		t.Fatal(err)
	}
	if c.Data.MaxJobInputGiB != DefaultMaxJobInputGiB || c.Data.DiskReserveGiB != DefaultDiskReserveGiB {
		t.Errorf("defaults %+v", c.Data)
	}
	for _, tc := range []struct{ from, to, key string }{
		{fmt.Sprintf("max_job_input_gib = %d", DefaultMaxJobInputGiB), "max_job_input_gib = 0", "data.max_job_input_gib 0: use 1 to"},
		{fmt.Sprintf("max_job_input_gib = %d", DefaultMaxJobInputGiB), "max_job_input_gib = 2000000", "data.max_job_input_gib 2000000: use 1 to"},
		{fmt.Sprintf("disk_reserve_gib = %d", DefaultDiskReserveGiB), "disk_reserve_gib = -1", "data.disk_reserve_gib -1: use 0 to"},
		{fmt.Sprintf("disk_reserve_gib = %d", DefaultDiskReserveGiB), `disk_reserve_gib = "2GiB"`, "disk_reserve_gib"},
	} {
		p := filepath.Join(dir, "bad.toml")
		if err := os.WriteFile(p, []byte(strings.Replace(full, tc.from, tc.to, 1)), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadConfig(p); err == nil || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: %v, want an error saying %q", tc.to, err, tc.key)
		}
	}
	c = DefaultConfig(NetworkLocal)
	c.Data.DiskReserveGiB = 0
	if err := c.Validate(); err != nil {
		t.Errorf("disk_reserve_gib = 0 (no reserve) refused: %v", err)
	}
}
