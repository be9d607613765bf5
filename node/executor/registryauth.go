package executor

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"regexp"
	"strings"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/registry"
)

// RegistryAuth are the credentials a job's Image is pulled with from a
// private registry. Like Secrets they are never printed, logged or put in
// an error: String, GoString, LogValue and MarshalJSON show at most the
// user name, so fmt (%v, %+v, %#v), slog and encoding/json of a Spec that
// carries them are safe. Because of that, JSON does not round-trip them.
//
// A set of credentials is Username and Password, or an IdentityToken (an
// OAuth refresh token, with or without Username).
//
// Rule about images already in the engine's store (ensureImage):
//   - With RegistryAuth set the executor always pulls, even when the engine
//     has the image, so that the registry checks these credentials every
//     time; a job with wrong credentials never runs an image that another
//     job pulled with good ones. A pull of present layers costs a manifest
//     request.
//   - Without RegistryAuth an image already present is used as before
//     (pre-loaded and locally built images keep working offline), except
//     one that this Docker pulled with credentials: such an image is pulled
//     again, anonymously, so that a job without credentials cannot run a
//     private image that happens to be in the store. That memory is the
//     process's; after a restart an image pulled privately by an earlier
//     run is, for an anonymous job, like any other present image.
type RegistryAuth struct {
	Username      string
	Password      string
	IdentityToken string
	// ServerAddress is optional; if set it must name the registry of the
	// image reference ("127.0.0.1:5000", "ghcr.io", with or without a
	// scheme or path; for Docker Hub "docker.io", "index.docker.io" or
	// "registry-1.docker.io"), so that credentials go to no other registry.
	ServerAddress string
}

// String shows the user name only.
func (a RegistryAuth) String() string {
	var parts []string
	if a.Username != "" {
		parts = append(parts, "user="+a.Username)
	}
	if a.Password != "" {
		parts = append(parts, "password=REDACTED")
	}
	if a.IdentityToken != "" {
		parts = append(parts, "identity_token=REDACTED")
	}
	if a.ServerAddress != "" {
		parts = append(parts, "server="+a.ServerAddress)
	}
	return "RegistryAuth{" + strings.Join(parts, ", ") + "}"
}

// GoString keeps %#v from printing the password and token.
func (a RegistryAuth) GoString() string { return "executor." + a.String() }

// LogValue keeps slog from printing the password and token.
func (a RegistryAuth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// MarshalJSON keeps encoding/json (and slog's JSON handler) from writing
// the password and token.
func (a RegistryAuth) MarshalJSON() ([]byte, error) { return json.Marshal(a.String()) }

// imageRegistry is the registry host of an image reference: "docker.io"
// for Docker Hub, else the reference's domain ("127.0.0.1:5000").
func imageRegistry(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", err
	}
	return reference.Domain(named), nil
}

// normalizeServer turns a ServerAddress into a registry host as
// imageRegistry returns it.
func normalizeServer(addr string) string {
	s := strings.ToLower(strings.TrimSpace(addr))
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	if i := strings.IndexByte(s, '/'); i >= 0 {
		s = s[:i]
	}
	switch s {
	case "index.docker.io", "registry-1.docker.io":
		return "docker.io"
	}
	return s
}

// validateRegistryAuth checks s.RegistryAuth; errors never contain the
// password or token.
func (s *Spec) validateRegistryAuth(bad func(string, ...any) error) error {
	a := s.RegistryAuth
	if a == nil {
		return nil
	}
	switch {
	case a.Username == "" && a.Password == "" && a.IdentityToken == "":
		return bad("registry_auth: no credentials (leave it nil to pull anonymously)")
	case a.Password != "" && a.Username == "":
		return bad("registry_auth: a password without a user name")
	case a.Username != "" && a.Password == "" && a.IdentityToken == "":
		return bad("registry_auth: user %q without a password or identity token", a.Username)
	}
	host, err := imageRegistry(s.Image)
	if err != nil {
		return bad("registry_auth: image reference %q: %v", s.Image, err)
	}
	if a.ServerAddress != "" && normalizeServer(a.ServerAddress) != strings.ToLower(host) {
		return bad("registry_auth: server address %q is not the registry %q of image %q: credentials go only to the image's registry",
			a.ServerAddress, host, s.Image)
	}
	return nil
}

// encodeRegistryAuth is the X-Registry-Auth value for pulling ref with a.
func encodeRegistryAuth(a *RegistryAuth, ref string) (string, error) {
	server := a.ServerAddress
	if server == "" {
		host, err := imageRegistry(ref)
		if err != nil {
			return "", err
		}
		server = host
	}
	return registry.EncodeAuthConfig(registry.AuthConfig{
		Username: a.Username, Password: a.Password,
		IdentityToken: a.IdentityToken, ServerAddress: server,
	})
}

// scrubCredentials removes from msg whatever could carry a's secrets: the
// password, the identity token, the Basic authorization value and the
// encoded X-Registry-Auth header.
func scrubCredentials(msg string, a *RegistryAuth, header string) string {
	if a == nil {
		return msg
	}
	var secrets []string
	for _, s := range []string{a.Password, a.IdentityToken, header} {
		if s != "" {
			secrets = append(secrets, s)
		}
	}
	if a.Password != "" {
		basic := a.Username + ":" + a.Password
		secrets = append(secrets,
			base64.StdEncoding.EncodeToString([]byte(basic)),
			base64.URLEncoding.EncodeToString([]byte(basic)),
			base64.RawStdEncoding.EncodeToString([]byte(basic)),
			base64.RawURLEncoding.EncodeToString([]byte(basic)))
	}
	for _, s := range secrets {
		msg = strings.ReplaceAll(msg, s, "REDACTED")
	}
	return msg
}

// refusedPull reports whether an engine's pull error says the registry
// wanted credentials or refused those it got. A bare "denied" is not
// enough: a local "permission denied" is no registry's refusal.
func refusedPull(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{
		"unauthorized", "authentication required", "no basic auth credentials",
		"access denied", "resource is denied", "may require 'docker login'", "forbidden",
	} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return httpRefusal.MatchString(m)
}

var httpRefusal = regexp.MustCompile(`\b(401|403)\b|(^|: )denied:`)

// pullError is ensureImage's error for a failed pull of ref: it keeps the
// "executor: pull <ref>: " prefix (node/providing detects pull failures by
// it), says so when the registry refused, and carries no credential.
// The engine's error is not wrapped when a is set, so that nothing can
// unwrap to an unscrubbed message.
func pullError(ref string, a *RegistryAuth, header string, engineMsg string, engineErr error) error {
	msg := scrubCredentials(engineMsg, a, header)
	switch {
	case refusedPull(msg):
		return fmt.Errorf("executor: pull %s: the registry refused the pull: credentials needed (registry_auth) or wrong: %s", ref, msg)
	case engineErr != nil && a == nil:
		return fmt.Errorf("executor: pull %s: %w", ref, engineErr)
	}
	return fmt.Errorf("executor: pull %s: %s", ref, msg)
}

// markPrivate remembers that image ID came from a pull with credentials.
func (d *Docker) markPrivate(id string) {
	d.privMu.Lock()
	defer d.privMu.Unlock()
	if d.private == nil {
		d.private = map[string]bool{}
	}
	d.private[id] = true
}

// pulledPrivately reports whether this Docker pulled image ID with
// credentials.
func (d *Docker) pulledPrivately(id string) bool {
	d.privMu.Lock()
	defer d.privMu.Unlock()
	return d.private[id]
}
