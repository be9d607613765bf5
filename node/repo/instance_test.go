package repo

import (
	"os"
	"path/filepath"
	"testing"
)

// copyRepo copies every file of src into dst with its mode, as cp -a
// would.
func copyRepo(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// A repo's instance ID is made once and kept, across opens and a move of
// the repo within its filesystem; a copy of the repo, which carries the
// file, makes an ID of its own.
func TestInstanceIsTheRepos(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "repo")
	r, err := InitRepo(dir, DefaultConfig(NetworkLocal))
	if err != nil {
		t.Fatal(err)
	}
	id, err := r.Instance()
	if err != nil || len(id) < 16 {
		t.Fatalf("instance %q, %v", id, err)
	}
	if st, err := os.Stat(filepath.Join(dir, InstanceFile)); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("instance file: %v %v", st, err)
	}
	r2, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := r2.Instance(); err != nil || again != id {
		t.Fatalf("reopened: instance %q (%v), want %q", again, err, id)
	}

	cp := filepath.Join(base, "copy")
	copyRepo(t, dir, cp)
	rc, err := OpenRepo(cp)
	if err != nil {
		t.Fatal(err)
	}
	copied, err := rc.Instance()
	if err != nil || copied == id {
		t.Fatalf("the copy's instance %q (%v), want one other than %q", copied, err, id)
	}
	if again, err := rc.Instance(); err != nil || again != copied {
		t.Fatalf("the copy's instance changed from %q to %q (%v)", copied, again, err)
	}
	if p1, _ := r.PeerID(); p1 == "" {
		t.Fatal("no peer ID")
	} else if p2, _ := rc.PeerID(); p2 != p1 {
		t.Fatalf("the copy's peer ID %s, want %s", p2, p1)
	}

	moved := filepath.Join(base, "moved")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	rm, err := OpenRepo(moved)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rm.Instance(); err != nil || got != id {
		t.Fatalf("moved: instance %q (%v), want %q", got, err, id)
	}

	// A copy put where the original was (a second container mounting it
	// at the same path, a restored backup) is a copy too.
	if err := os.Rename(moved, filepath.Join(base, "away")); err != nil {
		t.Fatal(err)
	}
	copyRepo(t, filepath.Join(base, "away"), dir)
	rs, err := OpenRepo(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := rs.Instance(); err != nil || got == id || got == copied {
		t.Fatalf("a copy in the original's place: instance %q (%v), want a new one", got, err)
	}
}

// A corrupt instance file is replaced, not trusted.
func TestInstanceReplacesACorruptFile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	r, err := InitRepo(dir, DefaultConfig(NetworkLocal))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, InstanceFile), []byte("{\"id\":\"x\"}"), 0o600); err != nil {
		t.Fatal(err)
	}
	id, err := r.Instance()
	if err != nil || id == "x" || len(id) < 16 {
		t.Fatalf("instance %q, %v", id, err)
	}
}
