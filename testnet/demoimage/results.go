package demoimage

import (
	"os"
	"path/filepath"
)

// ResultsDoc says what WriteResults writes (the demo job's -write).
const ResultsDoc = "result.txt, and model/weights.bin (1 MiB + 7 bytes of byte i = i mod 251)"

// Results are the files WriteResults writes, by relative path: what a
// test expects back from `gleaner job fetch`.
func Results() map[string][]byte {
	w := make([]byte, 1<<20+7)
	for i := range w {
		w[i] = byte(i % 251)
	}
	return map[string][]byte{"result.txt": []byte("loss 0.042\n"), "model/weights.bin": w}
}

// WriteResults writes Results under dir.
func WriteResults(dir string) error {
	for rel, b := range Results() {
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
