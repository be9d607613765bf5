package attest

import (
	"slices"
	"testing"
)

func TestCanonicalModel(t *testing.T) {
	for name, want := range map[string]string{
		"NVIDIA GeForce RTX 4090":        "RTX4090",
		"NVIDIA A100-SXM4-80GB":          "A100-80GB",
		"NVIDIA A100-PCIE-40GB":          "A100-40GB",
		"NVIDIA H100 80GB HBM3":          "H100",
		"NVIDIA H200":                    "H200",
		"Tesla T4":                       "T4",
		"NVIDIA L4":                      "L4",
		"NVIDIA A10":                     "A10",
		"NVIDIA RTX A6000":               "RTXA6000",
		"NVIDIA GeForce RTX 3090":        "RTX3090",
		"NVIDIA L40S":                    "L40S",
		"NVIDIA RTX 6000 Ada Generation": "RTX6000Ada",
		// Not in the table: the rule must still give one stable spelling.
		"NVIDIA A100-SXM-80GB":          "A100-80GB",
		"NVIDIA A100-SXM4-40GB ":        "A100-40GB",
		"NVIDIA H100 NVL":               "H100",
		"NVIDIA H200 NVL":               "H200",
		"Tesla V100S-PCIE-32GB":         "V100S",
		"Tesla V100-PCIE-16GB":          "V100",
		"NVIDIA A10G":                   "A10G",
		"NVIDIA GeForce RTX 4080 SUPER": "RTX4080SUPER",
		"NVIDIA  GeForce   RTX 4090":    "RTX4090",
		"Quadro RTX 8000":               "RTX8000",
		"NVIDIA":                        "unknown",
		"":                              "unknown",
	} {
		if got := CanonicalModel(name); got != want {
			t.Errorf("CanonicalModel(%q) = %q, want %q", name, got, want)
		}
	}
}

// The simulation must impersonate names that map back to their own model,
// or simulated offers would land under a different capability key.
func TestCatalogueNamesAreCanonical(t *testing.T) {
	for model, spec := range catalogue {
		if got := CanonicalModel(spec.Name); got != model {
			t.Errorf("catalogue %s: name %q maps to %q", model, spec.Name, got)
		}
		if spec.VRAMMiB <= 0 || spec.PowerLimitW <= spec.IdlePowerW || spec.ComputeCap == "" {
			t.Errorf("catalogue %s: implausible spec %+v", model, spec)
		}
	}
}

func TestKnownModels(t *testing.T) {
	got := KnownModels()
	for _, m := range []string{"RTX3090", "RTX4090", "RTX5090", "A10", "A100-40GB", "A100-80GB",
		"H100", "H200", "L4", "L40S", "T4", "V100"} {
		if !slices.Contains(got, m) {
			t.Errorf("KnownModels() lacks %s", m)
		}
	}
	if !slices.IsSorted(got) {
		t.Errorf("KnownModels() not sorted: %v", got)
	}
}
