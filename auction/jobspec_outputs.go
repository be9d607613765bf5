package auction

import (
	"fmt"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Outputs is where the job writes its results: a volume of at most
// MaxBytes that the provider imports as a UnixFS DAG when the job ends and
// names by CID in its settlement; the renter fetches it with `gleaner job
// fetch`.
type Outputs struct {
	Path     string // path: absolute, clean; empty = no outputs
	MaxBytes int64  // max_size: the volume's quota, e.g. 2GiB
}

// Output volume bounds. The volume is a tmpfs on the provider (the one
// quota the kernel enforces on every filesystem), held in memory until
// the job ends, so it is bounded like memory is.
const (
	DefaultOutputBytes = 1 << 30
	MaxOutputBytes     = 64 << 30
)

var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}

// ParseSize reads a size in bytes with a binary unit: 512MiB, 10GiB.
func ParseSize(s string) (int64, error) {
	for _, u := range sizeUnits {
		num, ok := strings.CutSuffix(s, u.suffix)
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
		if err != nil || n <= 0 || n > (1<<62)/u.mult {
			break
		}
		return n * u.mult, nil
	}
	return 0, fmt.Errorf("%q: want a whole number and a unit, B KiB MiB GiB or TiB, such as 512MiB or 10GiB", s)
}

// FormatSize writes n in the largest unit that divides it.
func FormatSize(n int64) string {
	for _, u := range sizeUnits {
		if n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

func setOutputPath(d *specDecoder, p string, n *yaml.Node) error {
	v, err := text(p, n)
	if err != nil {
		return err
	}
	if verr := validInputPath(v); verr != nil {
		return specErr(n, p, "%v", verr)
	}
	d.s.Outputs.Path = v
	return nil
}

func setOutputSize(d *specDecoder, p string, n *yaml.Node) error {
	v, err := text(p, n)
	if err != nil {
		return err
	}
	b, perr := ParseSize(v)
	if perr != nil {
		return specErr(n, p, "%v", perr)
	}
	if b < 1<<20 || b > MaxOutputBytes {
		return specErr(n, p, "%s: use 1MiB to %s (the provider holds outputs in memory until the job ends)", v, FormatSize(MaxOutputBytes))
	}
	d.s.Outputs.MaxBytes = b
	return nil
}

// checkOutputs is the cross-field part: a path with max_size, apart from
// the checkpoint and the inputs.
func (d *specDecoder) checkOutputs() error {
	o := &d.s.Outputs
	if o.Path == "" {
		if o.MaxBytes != 0 {
			return &SpecError{d.lines["outputs.max_size"], "outputs.path", "required with max_size: where the job writes its results, such as /outputs"}
		}
		return nil
	}
	if o.MaxBytes == 0 {
		o.MaxBytes = DefaultOutputBytes
	}
	if c := d.s.Checkpoint.Path; c != "" && nested(o.Path, c) {
		return &SpecError{d.lines["outputs.path"], "outputs.path", fmt.Sprintf("%s overlaps checkpoint.path %s", o.Path, c)}
	}
	for i, in := range d.s.Inputs {
		if nested(o.Path, in.Path) {
			return &SpecError{d.lines["outputs.path"], "outputs.path", fmt.Sprintf("%s overlaps inputs[%d].path %s", o.Path, i, in.Path)}
		}
	}
	return nil
}

func encodeOutputs(root *yaml.Node, o Outputs) {
	if o.Path == "" {
		return
	}
	m := yMap()
	m.Style = yaml.FlowStyle
	yAdd(m, "path", yStr(o.Path))
	yAdd(m, "max_size", yStr(FormatSize(o.MaxBytes)))
	yAdd(root, "outputs", m)
}
