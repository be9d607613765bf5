package auction

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/ipfs/go-cid"
	"gopkg.in/yaml.v3"
)

// Input is a file tree the job reads: a UnixFS DAG the provider fetches
// by CID from any peer that has it, checks block by block, and mounts
// read-only at Path before the job starts.
type Input struct {
	CID  string // cid: the DAG's root, as `gleaner data add` or `ipfs add --cid-version=1` print it
	Src  string // src: a path on the renter's machine; its node imports it at submit and replaces it by its CID
	Path string // path: where the job sees it; absolute, clean, read-only
}

// MaxInputs bounds a spec's inputs: each is a volume on the provider.
const MaxInputs = 16

// reservedMounts are paths a job's inputs may not cover or sit in: the
// executor mounts its own things there, or the image's system lives there.
var reservedMounts = []string{"/tmp", "/dev", "/proc", "/sys", "/etc"}

// Unresolved reports an input still naming a path on the renter's machine.
// Only the renter's node may hold such a spec; what goes to providers names
// CIDs only, and a provider refuses anything else.
func (s *JobSpec) Unresolved() bool {
	for _, in := range s.Inputs {
		if in.Src != "" {
			return true
		}
	}
	return false
}

// dataCIDs are the DAGs the job reads, for ranking by locality: its
// datasets and its inputs' CIDs.
func (s *JobSpec) dataCIDs() []string {
	out := append([]string(nil), s.Datasets...)
	for _, in := range s.Inputs {
		if in.CID != "" && !containsFold(out, in.CID) {
			out = append(out, in.CID)
		}
	}
	return out
}

func setInputs(d *specDecoder, p string, n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return specErr(n, p, "want a list of {cid or src, path}")
	}
	if len(n.Content) > MaxInputs {
		return specErr(n, p, "%d entries, limit %d", len(n.Content), MaxInputs)
	}
	ins := make([]Input, 0, len(n.Content))
	for i, e := range n.Content {
		ip := p + "[" + strconv.Itoa(i) + "]"
		in, err := decodeInput(ip, e)
		if err != nil {
			return err
		}
		for j, other := range ins {
			if nested(in.Path, other.Path) {
				return specErr(e, ip+".path", "%s overlaps inputs[%d].path %s", in.Path, j, other.Path)
			}
		}
		ins = append(ins, in)
	}
	d.s.Inputs = ins
	return nil
}

func decodeInput(p string, n *yaml.Node) (Input, error) {
	var in Input
	if n.Kind != yaml.MappingNode {
		return in, specErr(n, p, "want a mapping such as {cid: bafy..., path: /data}")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		key, err := text(p, k)
		if err != nil {
			return in, err
		}
		fp := p + "." + key
		val, err := text(fp, v)
		if err != nil {
			return in, err
		}
		var dst *string
		switch key {
		case "cid":
			dst = &in.CID
			if _, cerr := cid.Decode(val); cerr != nil {
				return in, specErr(v, fp, "%q is not a CID: %v", val, cerr)
			}
		case "src":
			dst = &in.Src
			if val == "" || strings.IndexByte(val, 0) >= 0 {
				return in, specErr(v, fp, "want a path on this machine, such as ./data")
			}
		case "path":
			dst = &in.Path
			if verr := validInputPath(val); verr != nil {
				return in, specErr(v, fp, "%v", verr)
			}
		default:
			return in, specErr(k, fp, "unknown field; an input has cid or src, and path")
		}
		if *dst != "" {
			return in, specErr(k, fp, "repeated")
		}
		*dst = val
	}
	switch {
	case in.CID == "" && in.Src == "":
		return in, specErr(n, p, "give cid (a DAG's root) or src (a path on this machine)")
	case in.CID != "" && in.Src != "":
		return in, specErr(n, p, "give cid or src, not both")
	case in.Path == "":
		return in, specErr(n, p+".path", "required: where the job sees the files, such as /data")
	}
	return in, nil
}

func validInputPath(s string) error {
	if !path.IsAbs(s) || path.Clean(s) != s || s == "/" || strings.IndexByte(s, 0) >= 0 {
		return fmt.Errorf("%q: want an absolute, clean path below /, such as /data", s)
	}
	for _, r := range reservedMounts {
		if nested(s, r) {
			return fmt.Errorf("%q overlaps %s, which the provider or the image uses", s, r)
		}
	}
	return nil
}

// nested reports whether a and b are the same path or one holds the other.
func nested(a, b string) bool {
	return a == b || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

func encodeInputs(ins []Input) *yaml.Node {
	list := &yaml.Node{Kind: yaml.SequenceNode}
	for _, in := range ins {
		m := yMap()
		m.Style = yaml.FlowStyle
		if in.CID != "" {
			yAdd(m, "cid", yStr(in.CID))
		}
		if in.Src != "" {
			yAdd(m, "src", yStr(in.Src))
		}
		yAdd(m, "path", yStr(in.Path))
		list.Content = append(list.Content, m)
	}
	return list
}
