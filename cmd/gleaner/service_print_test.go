package main

import (
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node"
)

// service status shows a replica whose lease is being renewed, with its
// successor's job, and how many leases were renewed.
func TestPrintServiceShowsRenewal(t *testing.T) {
	var b strings.Builder
	printService(&b, node.ServiceView{Name: "chat", Gateway: "up", Renewed: 2, Replicas: []node.ServiceReplica{
		{Index: 0, Job: "chat-old", State: "running", Ready: true, Renewing: "chat-new", Note: "renews chat-older (replica 0): ready before the lease's end"},
		{Index: 1, Job: "chat-other", State: "running", Ready: true},
	}})
	out := b.String()
	for _, want := range []string{"2 replica leases renewed", "renewing: chat-new; renews chat-older"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	if strings.Count(out, "renewing:") != 1 {
		t.Errorf("a replica not renewing shown as renewing:\n%s", out)
	}
}
