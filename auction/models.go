package auction

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gleaner-net/gleaner/attest"
)

// nvmlNames are driver names (as nvidia-smi prints them) of boards a
// provider may sell. Their models are what attest.CanonicalModel makes of
// them, so this list and what offers carry cannot drift apart.
var nvmlNames = []string{
	"NVIDIA B200", "NVIDIA B100", "NVIDIA GH200 480GB", "NVIDIA H100 NVL", "NVIDIA H800", "NVIDIA H20",
	"NVIDIA A40", "NVIDIA A30", "NVIDIA A16", "NVIDIA A10G", "NVIDIA A2", "NVIDIA L40", "NVIDIA L20",
	"Tesla V100S-PCIE-32GB", "Tesla P100-PCIE-16GB", "Tesla P40", "Tesla P4", "Tesla K80",
	"NVIDIA RTX A5000", "NVIDIA RTX A4500", "NVIDIA RTX A4000", "NVIDIA RTX A2000",
	"NVIDIA RTX 5000 Ada Generation", "NVIDIA RTX 4500 Ada Generation", "NVIDIA RTX 4000 Ada Generation",
	"Quadro RTX 8000", "Quadro RTX 6000", "Quadro RTX 5000", "NVIDIA TITAN RTX",
	"NVIDIA GeForce RTX 5080", "NVIDIA GeForce RTX 5070 Ti", "NVIDIA GeForce RTX 5070",
	"NVIDIA GeForce RTX 5060 Ti", "NVIDIA GeForce RTX 5060",
	"NVIDIA GeForce RTX 4080 SUPER", "NVIDIA GeForce RTX 4080", "NVIDIA GeForce RTX 4070 Ti SUPER",
	"NVIDIA GeForce RTX 4070 Ti", "NVIDIA GeForce RTX 4070 SUPER", "NVIDIA GeForce RTX 4070",
	"NVIDIA GeForce RTX 4060 Ti", "NVIDIA GeForce RTX 4060",
	"NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 3080 Ti", "NVIDIA GeForce RTX 3080",
	"NVIDIA GeForce RTX 3070 Ti", "NVIDIA GeForce RTX 3070", "NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 3060",
	"NVIDIA GeForce RTX 2080 Ti", "NVIDIA GeForce RTX 2080 SUPER", "NVIDIA GeForce RTX 2080",
	"NVIDIA GeForce RTX 2070 SUPER", "NVIDIA GeForce RTX 2070", "NVIDIA GeForce RTX 2060",
}

// KnownModels are the GPU models gleaner knows, the ones it simulates first,
// for error messages. The A800's 80 GB board is named as the A100's is,
// as the market simulator's trace converter names it.
var KnownModels = func() []string {
	out := attest.KnownModels()
	for _, n := range nvmlNames {
		if m := attest.CanonicalModel(n); !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return append(out, "A800-80GB")
}()

// commonModels are the models an error lists: the simulated ones, which
// are the boards most often sold; KnownModels is too long for one line.
var commonModels = attest.KnownModels()

// checkModel refuses a GPU model that is a likely typo of a known one
// (RTX4O90, H101, A100-80G) and accepts any other well-formed model. The
// list cannot be complete: attest names a board it has no entry for by a
// rule, so a provider can sell a model released after this code, and a
// renter must be able to ask for it. A model that extends a known one
// (A100 of A10, RTX4090D of RTX4090) names another board rather than a
// slip, unless it is also a known model cut short.
func checkModel(s string) error {
	if !isModel(s) {
		return fmt.Errorf("%q is not a GPU model (1..%d of A-Z a-z 0-9 . _ -)", s, maxShortString)
	}
	ls := strings.ToLower(s)
	for _, k := range KnownModels {
		if ls == strings.ToLower(k) {
			return nil
		}
	}
	m := Suggest(s, KnownModels)
	if m == "" {
		return nil
	}
	if !strings.HasPrefix(strings.ToLower(m), ls) {
		for _, k := range KnownModels {
			if strings.HasPrefix(ls, strings.ToLower(k)) {
				return nil
			}
		}
	}
	return fmt.Errorf("%q is not a GPU model gleaner knows; did you mean %q? (common models: %s)", s, m, strings.Join(commonModels, " "))
}
