package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// Files a run writes into its output directory.
const (
	ReportJSON = "report.json" // every figure; the same for the same options
	ReportHTML = "report.html" // the figures with plots, self-contained
	TimingJSON = "timing.json" // how long it took here (varies by machine)
	SupplyCSV  = "supply.csv"  // the supply drawn, canonical (feed it back with --supply)
	DemandCSV  = "demand.csv"  // the demand sampled, canonical (feed it back with --demand)
)

// WriteDir writes the run's files into dir, creating it. Each file is
// written to a temporary name and renamed, so a crash never leaves a
// half-written report behind.
func (r *Result) WriteDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var js, html, timing, supply, demand bytes.Buffer
	if err := r.Report.WriteJSON(&js); err != nil {
		return err
	}
	if err := r.Report.WriteHTML(&html, r.Series); err != nil {
		return err
	}
	enc := json.NewEncoder(&timing)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r.Timing); err != nil {
		return err
	}
	if err := WriteSupplyCSV(&supply, r.Supply); err != nil {
		return err
	}
	if err := WriteDemandCSV(&demand, r.Demand); err != nil {
		return err
	}
	for name, b := range map[string][]byte{ReportJSON: js.Bytes(), ReportHTML: html.Bytes(), TimingJSON: timing.Bytes(),
		SupplyCSV: supply.Bytes(), DemandCSV: demand.Bytes()} {
		if err := writeAtomic(filepath.Join(dir, name), b); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	return nil
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
