package repo

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ServiceTokenDir holds, beside rpc.token, the bearer token of each
// service whose gateway listens beyond loopback: <name>.token, mode 0600,
// one line of 64 hex digits (32 bytes from crypto/rand). A script reads
// it as it reads rpc.token; the node keeps it across restarts and
// deletes it at `service down`.
const ServiceTokenDir = "service-tokens"

// ServiceTokenPath is where service name's gateway token is kept.
func (r *Repo) ServiceTokenPath(name string) string {
	return filepath.Join(r.Dir, ServiceTokenDir, name+".token")
}

func checkServiceName(name string) error {
	if name == "" || strings.ContainsAny(name, `/\`) || filepath.Base(name) != name {
		return fmt.Errorf("service name %q cannot name a token file", name)
	}
	return nil
}

// NewServiceToken makes a fresh token for service name and writes it,
// replacing the one there was (atomically: a reader sees the old token or
// the new one).
func (r *Repo) NewServiceToken(name string) (string, error) {
	if err := checkServiceName(name); err != nil {
		return "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generate the service's token: %w", err)
	}
	tok := hex.EncodeToString(b)
	dir := filepath.Join(r.Dir, ServiceTokenDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	f, err := os.CreateTemp(dir, "."+name+".token.*")
	if err != nil {
		return "", err
	}
	tmp := f.Name()
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, r.ServiceTokenPath(name))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("write the service's token: %w", err)
	}
	return tok, nil
}

// ServiceToken reads service name's token; an error that wraps
// os.ErrNotExist when there is none. Like rpc.token, one readable by
// other users is refused.
func (r *Repo) ServiceToken(name string) (string, error) {
	if err := checkServiceName(name); err != nil {
		return "", err
	}
	path := r.ServiceTokenPath(name)
	b, err := readPrivate(path)
	if err != nil {
		return "", err
	}
	t := strings.TrimSpace(string(b))
	if len(t) < 32 {
		return "", fmt.Errorf("service token %s is too short (under 32 characters); delete it and restart the node for a new one", path)
	}
	return t, nil
}

// RemoveServiceToken deletes service name's token; none is no error.
func (r *Repo) RemoveServiceToken(name string) error {
	if err := checkServiceName(name); err != nil {
		return err
	}
	err := os.Remove(r.ServiceTokenPath(name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}
