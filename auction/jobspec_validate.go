package auction

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// crossChecks validates what involves more than one field, naming the line
// of the field a user would edit to fix it.
func (d *specDecoder) crossChecks(root *yaml.Node) error {
	s := d.s
	if err := d.checkService(); err != nil {
		return err
	}
	if err := d.checkArray(); err != nil {
		return err
	}
	if err := d.checkGang(); err != nil {
		return err
	}
	if s.Workload == "" {
		s.Workload = "batch"
	}
	if s.Duration.Expected == 0 {
		s.Duration.Expected = s.Duration.Max
	}
	if s.Duration.Expected > s.Duration.Max {
		return &SpecError{d.lines["duration.expected"], "duration.expected", fmt.Sprintf("%s is longer than duration.max %s", s.Duration.Expected, s.Duration.Max)}
	}
	// Only gold reserves a window; a start on silver or bronze would be
	// silently ignored, which is worse than an error.
	if s.Tier == Gold && s.Start.IsZero() {
		return &SpecError{d.lines["tier"], "start", "gold reserves a window and requires start"}
	}
	goldFloor := s.Service != nil && s.Service.Floor.Tier == Gold
	if goldFloor && s.Start.IsZero() {
		return &SpecError{d.lines["service.floor.tier"], "start", "a gold floor reserves a window and requires start"}
	}
	if s.Tier != Gold && !goldFloor && !s.Start.IsZero() {
		return &SpecError{d.lines["start"], "start", "only gold reserves a window; remove start or use tier: gold"}
	}
	for i, in := range s.Inputs {
		if s.Checkpoint.Path != "" && nested(in.Path, s.Checkpoint.Path) {
			f := fmt.Sprintf("inputs[%d].path", i)
			return &SpecError{d.lines["inputs"], f, fmt.Sprintf("%s overlaps checkpoint.path %s", in.Path, s.Checkpoint.Path)}
		}
	}
	if err := d.checkOutputs(); err != nil {
		return err
	}
	if s.Verify.Replicas > 1 && s.Verify.ExpectSHA256 != "" {
		return &SpecError{d.lines["verify.replicas"], "verify", "use either replicas (compare providers) or expect_sha256 (a known answer), not both"}
	}
	return nil
}

func validName(s string) (string, error) {
	// The model charset: safe in file names, logs and the CLI unquoted.
	if !isModel(s) {
		return "", fmt.Errorf("%q: want 1..64 of A-Z a-z 0-9 . _ -", s)
	}
	return s, nil
}

func validModel(s string) (string, error) {
	if err := checkModel(s); err != nil {
		return "", err
	}
	return s, nil
}

func validArg(s string) (string, error) {
	if s == "" || strings.IndexByte(s, 0) >= 0 {
		return "", errors.New("must be non-empty and free of NUL bytes")
	}
	return s, nil
}

func validEnvKey(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i, r := range s {
		if !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func validRegion(s string) (string, error) {
	if err := checkContinent(s); err != nil {
		return "", err
	}
	return canonicalContinent(strings.ToLower(s)), nil
}

func validCountry(s string) (string, error) {
	// The full list, not just "two letters": a typo such as UK (the code
	// is GB) in a deny list would otherwise deny nothing, silently.
	if err := checkCountry(s); err != nil {
		return "", err
	}
	return strings.ToUpper(s), nil
}

func validDataset(s string) (string, error) {
	if _, err := datasetKey(s); err != nil {
		return "", fmt.Errorf("%q is not a CID", s)
	}
	return s, nil
}

func validCheckpoint(s string) (string, error) {
	if !path.IsAbs(s) || path.Clean(s) != s || strings.IndexByte(s, 0) >= 0 {
		return "", fmt.Errorf("%q: want an absolute, clean path such as /checkpoint", s)
	}
	return s, nil
}

// ParseSHA256 accepts exactly 64 lower-case hex digits: an output hash as
// providers report it.
func ParseSHA256(s string) (string, error) {
	if v, err := validSHA256(s); err != nil || v != s {
		return "", fmt.Errorf("%q is not a lower-case sha256 in hex", s)
	}
	return s, nil
}

func validSHA256(s string) (string, error) {
	if len(s) != 64 || strings.Trim(strings.ToLower(s), "0123456789abcdef") != "" {
		return "", fmt.Errorf("%q: want 64 hex digits (sha256sum's output)", s)
	}
	return strings.ToLower(s), nil
}

func validWorkload(s string) (string, error) {
	if !contains(Workloads, s) {
		return "", fmt.Errorf("%q: want one of %s", s, strings.Join(Workloads, ", "))
	}
	return s, nil
}

// isoCountries are the officially assigned ISO 3166-1 alpha-2 codes (249),
// space-separated with a space at each end so " XX " finds one.
const isoCountries = " AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ " +
	"CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR " +
	"GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP " +
	"KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ " +
	"NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW " +
	"SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ " +
	"UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW "

// The OCI reference grammar of distribution/reference, restated here so
// that auction does not depend on a container library for one regexp.
const (
	refDomainPart = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	refDomain     = refDomainPart + `(?:\.` + refDomainPart + `)*(?::[0-9]+)?`
	refPathPart   = `[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*`
	refTag        = `[\w][\w.-]{0,127}`
	refDigest     = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	maxRefName    = 255
)

var imageRef = regexp.MustCompile(`^(?:` + refDomain + `/)?` + refPathPart + `(?:/` + refPathPart + `)*(?::` + refTag + `)?(?:@` + refDigest + `)?$`)

func validImage(s string) (string, error) {
	if len(s) > 512 || !imageRef.MatchString(s) {
		return "", fmt.Errorf("%q is not an image reference ([registry/]path[:tag][@digest], path in lower case)", s)
	}
	if n := len(imageRepo(s)); n > maxRefName {
		return "", fmt.Errorf("repository name is %d bytes, limit %d", n, maxRefName)
	}
	return s, nil
}

// imageRepo strips the digest and tag: "reg:5000/a/b:1@sha256:.." -> "reg:5000/a/b".
// A tag's colon is the last one after the last slash, which tells it from
// a registry port.
func imageRepo(ref string) string {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndexByte(ref, ':'); i > strings.LastIndexByte(ref, '/') {
		ref = ref[:i]
	}
	return ref
}

// imageNames are the spellings an owner's allowlist pattern is matched
// against: the reference as written and its repository, each also in the
// normalised form (docker.io/library/ubuntu for ubuntu), so that a pattern
// without a tag allows every tag, and both "ubuntu" and
// "docker.io/library/*" allow ubuntu:24.04.
func imageNames(ref string) []string {
	names := []string{ref, imageRepo(ref)}
	first, _, hasSlash := strings.Cut(ref, "/")
	if !hasSlash || !strings.ContainsAny(first, ".:") && first != "localhost" {
		full := "docker.io/" + ref
		if !hasSlash {
			full = "docker.io/library/" + ref
		}
		names = append(names, full, imageRepo(full))
	}
	return names
}

// imageAllowed reports whether any pattern (path.Match syntax: * does not
// cross a slash) matches any spelling of the image. An empty allowlist
// allows every image; a malformed pattern allows nothing.
func imageAllowed(patterns, names []string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		for _, n := range names {
			if ok, err := path.Match(p, n); ok && err == nil {
				return true
			}
		}
	}
	return false
}

func setExitCodes(d *specDecoder, path string, n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return specErr(n, path, "want a list")
	}
	if len(n.Content) > maxSpecList {
		return specErr(n, path, "%d entries, limit %d", len(n.Content), maxSpecList)
	}
	codes := make([]int, 0, len(n.Content))
	for i, e := range n.Content {
		p := path + "[" + strconv.Itoa(i) + "]"
		c, err := integer(p, e, 1, 255)
		if err != nil {
			return err
		}
		for _, x := range codes {
			if x == c {
				return specErr(e, p, "%d repeated", c)
			}
		}
		codes = append(codes, c)
	}
	d.s.Retry.OnExitCodes = codes
	return nil
}

func setAllowSimulated(d *specDecoder, path string, n *yaml.Node) error {
	v, err := text(path, n)
	if err != nil {
		return err
	}
	if n.Tag != "!!bool" || (v != "true" && v != "false") {
		return specErr(n, path, "want true or false, got %q", v)
	}
	d.s.AllowSimulated = v == "true"
	return nil
}

// SpecFieldDoc documents one job spec field, for `gleaner job spec --help`
// and docs/: Name is the dotted YAML path.
type SpecFieldDoc struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Required bool   `json:"required"`
	Default  string `json:"default,omitempty"`
	Help     string `json:"help"`
}

// JobSpecFields lists every field ParseJobSpec accepts, in document order,
// generated from the parser's own table.
func JobSpecFields() []SpecFieldDoc {
	var out []SpecFieldDoc
	var walk func(prefix string, schema []specField)
	walk = func(prefix string, schema []specField) {
		for _, f := range schema {
			out = append(out, SpecFieldDoc{joinPath(prefix, f.name), f.typ, f.required, f.def, f.help})
			walk(joinPath(prefix, f.name), f.sub)
		}
	}
	walk("", jobSpecSchema)
	return out
}

// JobSpecTable renders JobSpecFields as a Markdown table for the docs.
func JobSpecTable() string {
	var b strings.Builder
	b.WriteString("| field | type | required | default | meaning |\n|---|---|---|---|---|\n")
	for _, f := range JobSpecFields() {
		req := ""
		if f.Required {
			req = "yes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Name, f.Type, req, f.Default, f.Help)
	}
	return b.String()
}
