package auction

import (
	"os"
	"strings"
	"testing"
)

// TestJobsDocListsEveryField keeps docs/JOBS.md's field table identical to
// the one generated from the parser.
func TestJobsDocListsEveryField(t *testing.T) {
	doc, err := os.ReadFile("../docs/JOBS.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), JobSpecTable()) {
		t.Fatal("docs/JOBS.md's field table differs from JobSpecTable(); regenerate it")
	}
}
