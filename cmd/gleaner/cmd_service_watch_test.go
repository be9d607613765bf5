package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gleaner-net/gleaner/node/gateway"
	"github.com/gleaner-net/gleaner/node/services"
)

func TestServiceWatchLine(t *testing.T) {
	v := services.ServiceView{Name: "chat", Gateway: "up", Replicas: []services.ServiceReplica{{Ready: true}, {}}}
	at := time.Date(2026, 12, 2, 12, 0, 1, 0, time.Local)
	if got, want := watchLine(at, v), "12:00:01  chat  ready 1/2"; got != want {
		t.Errorf("without stats: %q, want %q", got, want)
	}
	v.Stats = &gateway.Stats{Figures: gateway.Figures{Requests: 200, Errors: 2, QPS: 3.5,
		LatencyP50: 12 * time.Millisecond, LatencyP95: 40 * time.Millisecond, LatencyP99: 81 * time.Millisecond,
		Spent: 1_500_000, PerKRequests: 7_500_000}}
	got := watchLine(at, v)
	for _, want := range []string{"qps 3.50", "p50 12ms p95 40ms p99 81ms", "errors 2 (1.0%)", "ready 1/2", "per 1k req 7.5", "per 1M tok -"} {
		if !strings.Contains(got, want) {
			t.Errorf("line %q lacks %q", got, want)
		}
	}
}

func TestServiceLogsPrefixAndTail(t *testing.T) {
	var b bytes.Buffer
	w := &prefixWriter{w: &b}
	w.write(0, "a\nb")
	w.write(1, "x\n")
	w.write(0, "c\n")
	w.write(1, "unended")
	w.flush(1)
	if got, want := b.String(), "[0] a\n[1] x\n[0] bc\n[1] unended\n"; got != want {
		t.Errorf("prefixed %q, want %q", got, want)
	}
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{
		{"1\n2\n3\n", 2, "2\n3\n"}, {"1\n2\n3", 1, "3"}, {"1\n2\n", 5, "1\n2\n"}, {"1\n2\n", 0, "1\n2\n"}, {"", 3, ""},
	} {
		if got := tailLines(c.in, c.n); got != c.want {
			t.Errorf("tailLines(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestServiceLogsAndWatchUsage(t *testing.T) {
	repo := t.TempDir()
	mustUsageText(t, gleaner(t, "--repo", repo, "service", "logs"), "service logs", "logs needs exactly one service name", "for example: gleaner service logs")
	mustUsageText(t, gleaner(t, "--repo", repo, "service", "logs", "chat", "--tail", "-1"), "service logs --tail -1", "--tail -1: want 0 or more lines", "--tail 20")
	mustUsageText(t, gleaner(t, "--repo", repo, "service", "status", "--watch"), "service status --watch", "status needs exactly one service name", "service names")
	r := gleaner(t, "service", "logs", "--help")
	for _, want := range []string{"--replica", "--follow", "--tail", "[I] line"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("service logs --help lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := gleaner(t, "service", "status", "--help"); !strings.Contains(r.stdout, "--watch") {
		t.Errorf("service status --help lacks --watch:\n%s", r.stdout)
	}
}
