package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/gleaner-net/gleaner/node"
)

// offer clear-fault says what was cleared and where the GPU stands: offered
// again, faulted anew, or not yet polled.
func TestPrintClearFault(t *testing.T) {
	offered := &node.GPUStatus{Offered: true}
	offered.Index = 1
	again := &node.GPUStatus{Withdrawn: "Xid 48", Stopping: "Xid 48", Fault: "Xid 48"}
	again.Index = 1
	for _, c := range []struct {
		r    node.ClearFaultResult
		want []string
	}{
		{node.ClearFaultResult{GPU: 1, Cleared: "Xid 79", Polled: true, Status: offered}, []string{"GPU 1: fault cleared (it was: Xid 79)", "state: offered, free"}},
		{node.ClearFaultResult{GPU: 1, Cleared: "Xid 79", Polled: true, Status: again}, []string{"a NEW fault arrived", "nvidia-smi -q -i 1", "FAULTY"}},
		{node.ClearFaultResult{GPU: 1, Cleared: "Xid 79", Status: again}, []string{"has not polled since", "offer show"}},
	} {
		var b bytes.Buffer
		printClearFault(&b, c.r)
		for _, w := range c.want {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%+v printed %q, want %q in it", c.r, b.String(), w)
			}
		}
	}
}
