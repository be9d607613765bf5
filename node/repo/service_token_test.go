package repo

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A service's gateway token: made fresh, private, read back the same,
// refused once others can read it, and gone after Remove.
func TestServiceTokenFile(t *testing.T) {
	r := &Repo{Dir: t.TempDir()}
	if _, err := r.ServiceToken("chat"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("no token yet: %v, want ErrNotExist", err)
	}
	tok, err := r.NewServiceToken("chat")
	if err != nil || len(tok) != 64 {
		t.Fatalf("NewServiceToken: %q, %v", tok, err)
	}
	path := r.ServiceTokenPath("chat")
	if path != filepath.Join(r.Dir, "service-tokens", "chat.token") {
		t.Fatalf("path %s", path)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, filepath.Dir(path): 0o700} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s: %v, mode %v, want %v", p, err, st.Mode().Perm(), want)
		}
	}
	if got, err := r.ServiceToken("chat"); err != nil || got != tok {
		t.Fatalf("read back %q, %v; want %q", got, err, tok)
	}
	again, err := r.NewServiceToken("chat")
	if err != nil || again == tok {
		t.Fatalf("a second token %q (%v) is the first", again, err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Fatalf("left behind: %v", ents)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ServiceToken("chat"); err == nil {
		t.Fatal("a token others can read was accepted")
	}
	if err := r.RemoveServiceToken("chat"); err != nil {
		t.Fatal(err)
	}
	if err := r.RemoveServiceToken("chat"); err != nil {
		t.Fatalf("removing it twice: %v", err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("still there: %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b", `a\b`} {
		if _, err := r.NewServiceToken(bad); err == nil {
			t.Errorf("name %q accepted", bad)
		}
	}
}
