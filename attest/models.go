package attest

import (
	"sort"
	"strings"
)

// modelNames maps driver names whose canonical model the generic rule in
// CanonicalModel would get wrong or make ugly. Offers, DHT capability keys
// (gpu/<model>) and job specs all use the canonical form, so two boards of
// one model must never end up under two spellings.
var modelNames = map[string]string{
	"NVIDIA A100-SXM4-80GB":          "A100-80GB",
	"NVIDIA A100 80GB PCIe":          "A100-80GB",
	"NVIDIA A100-SXM4-40GB":          "A100-40GB",
	"NVIDIA A100-PCIE-40GB":          "A100-40GB",
	"NVIDIA H100 80GB HBM3":          "H100",
	"NVIDIA H100 PCIe":               "H100",
	"NVIDIA H200":                    "H200",
	"NVIDIA RTX 6000 Ada Generation": "RTX6000Ada",
	"NVIDIA GeForce RTX 4090":        "RTX4090",
	"NVIDIA GeForce RTX 3090":        "RTX3090",
	"NVIDIA GeForce RTX 5090":        "RTX5090",
	"NVIDIA RTX A6000":               "RTXA6000",
	"NVIDIA L40S":                    "L40S",
	"NVIDIA L4":                      "L4",
	"NVIDIA A10":                     "A10",
	"Tesla T4":                       "T4",
	"Tesla V100-SXM2-16GB":           "V100",
	"Tesla V100-PCIE-32GB":           "V100",
}

// vendorWords are brand words that carry no model information.
var vendorWords = map[string]bool{"NVIDIA": true, "GeForce": true, "Tesla": true, "Quadro": true}

// formFactorFamilies are data-centre families whose driver names append a
// form factor ("-SXM4", " PCIe", " NVL", "HBM3") that does not change what a
// renter buys, so only the family (and, for A100, the memory size) is kept.
var formFactorFamilies = []string{"A100", "H100", "H200", "V100", "V100S", "GH200", "B200"}

// CanonicalModel maps the driver's full device name to gleaner's short
// model: the table first, then a rule for unlisted names (strip vendor
// words and spaces, and form factors of data-centre families), so a new
// board still gets a stable, readable model without a code change.
func CanonicalModel(fullName string) string {
	name := strings.Join(strings.Fields(fullName), " ")
	if m, ok := modelNames[name]; ok {
		return m
	}
	var words []string
	for _, w := range strings.Fields(name) {
		if !vendorWords[w] {
			words = append(words, w)
		}
	}
	if len(words) == 0 {
		return "unknown"
	}
	first := strings.SplitN(words[0], "-", 2)[0]
	for _, fam := range formFactorFamilies {
		if first != fam {
			continue
		}
		if fam == "A100" {
			if strings.Contains(name, "80GB") {
				return "A100-80GB"
			}
			return "A100-40GB"
		}
		return fam
	}
	return strings.Join(words, "")
}

// modelSpec is what the simulation needs to impersonate a model. Figures
// are what nvidia-smi shows on a stock board, so simulated offers price
// and match like real ones.
type modelSpec struct {
	Name        string  // driver's full name
	VRAMMiB     int     // as NVML reports it (slightly under the marketing size)
	ComputeCap  string  // CUDA compute capability
	PowerLimitW float64 // default enforced power limit
	IdleTempC   int
	IdlePowerW  float64
}

var catalogue = map[string]modelSpec{
	"RTX3090":   {"NVIDIA GeForce RTX 3090", 24576, "8.6", 350, 36, 24},
	"RTX4090":   {"NVIDIA GeForce RTX 4090", 24564, "8.9", 450, 34, 19},
	"RTX5090":   {"NVIDIA GeForce RTX 5090", 32607, "12.0", 575, 33, 27},
	"A10":       {"NVIDIA A10", 23028, "8.6", 150, 32, 17},
	"A100-40GB": {"NVIDIA A100-SXM4-40GB", 40960, "8.0", 400, 31, 54},
	"A100-80GB": {"NVIDIA A100-SXM4-80GB", 81920, "8.0", 400, 32, 61},
	"H100":      {"NVIDIA H100 80GB HBM3", 81559, "9.0", 700, 30, 72},
	"H200":      {"NVIDIA H200", 143771, "9.0", 700, 30, 76},
	"L4":        {"NVIDIA L4", 23034, "8.9", 72, 30, 16},
	"L40S":      {"NVIDIA L40S", 46068, "8.9", 350, 29, 33},
	"T4":        {"Tesla T4", 15360, "7.5", 70, 31, 10},
	"V100":      {"Tesla V100-SXM2-16GB", 16384, "7.0", 300, 33, 41},
}

// KnownModels lists the canonical models the simulation can impersonate,
// sorted, for error messages and `--simulate` help.
func KnownModels() []string {
	out := make([]string, 0, len(catalogue))
	for m := range catalogue {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}
