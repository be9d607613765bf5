package main

import (
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node/services"
)

// service status shows a replica whose lease is being renewed, with its
// successor's job, and how many leases were renewed.
func TestPrintServiceShowsRenewal(t *testing.T) {
	var b strings.Builder
	printService(&b, services.ServiceView{Name: "chat", Gateway: "up", Renewed: 2, Replicas: []services.ServiceReplica{
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

// service status shows, for a gateway that needs a token, where it
// listens, the token's file and a curl line; nothing of the kind for one
// on loopback.
func TestPrintServiceShowsTheToken(t *testing.T) {
	var b strings.Builder
	curl := `curl -H "Authorization: Bearer $(cat /r/service-tokens/chat.token)" http://127.0.0.1:8080/health`
	printService(&b, services.ServiceView{Name: "chat", Gateway: "up", URL: "http://127.0.0.1:8080", Listen: "0.0.0.0:8080",
		LAN: []string{"http://192.168.1.20:8080"}, Token: "/r/service-tokens/chat.token", Curl: curl})
	out := b.String()
	for _, want := range []string{
		"service chat: gateway up at http://127.0.0.1:8080\n",
		"  listens on 0.0.0.0:8080 (every interface); other machines: http://192.168.1.20:8080\n",
		"  every call needs the bearer token in /r/service-tokens/chat.token\n",
		"  " + curl + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	b.Reset()
	printService(&b, services.ServiceView{Name: "chat", Gateway: "up", URL: "http://127.0.0.1:8080", Listen: "127.0.0.1:8080", Curl: "curl http://127.0.0.1:8080/health"})
	if out := b.String(); strings.Contains(out, "token") || strings.Contains(out, "listens on") {
		t.Errorf("a loopback gateway shown as needing a token:\n%s", out)
	}
}
