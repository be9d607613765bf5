package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzReadDemandCSV: no input makes the reader panic, and whatever it
// accepts writes out and reads back as the same jobs.
func FuzzReadDemandCSV(f *testing.F) {
	if raw, err := os.ReadFile(filepath.Join("testdata", "demand_small.csv")); err == nil {
		f.Add(raw)
	}
	var buf bytes.Buffer
	if err := WriteDemandCSV(&buf, &Demand{Jobs: randomJobs(9, 5)}); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add([]byte(demandHeader + "\n0,60,1,,silver,,,batch\n"))
	f.Add([]byte(demandHeader + ",id\n\"0\",\"60\",1,\"A10|T4\",gold,0.5,eu,serving,\"x\"\r\n"))
	f.Add([]byte(demandHeader + "\n0,60,1,a\"b,silver,,,batch\n"))
	// Gangs: the members column (1 is not a gang, gold gangs refused).
	f.Add([]byte(demandHeader + ",id,renter,start_s,members\n0,60,2,,bronze,,,training,g,0,0,4\n5,60,1,,silver,,,batch,s,1,0,1\n"))
	f.Add([]byte(demandHeader + ",id,renter,start_s,members\n0,60,2,,gold,,,training,g,0,100,2\n"))
	// Arrays: the shards and max_parallel columns (gold, gang and
	// max_parallel above shards refused).
	f.Add([]byte(demandHeader + ",id,renter,start_s,members,shards,max_parallel\n0,60,1,,bronze,,,batch,a,0,0,1,6,2\n5,60,1,,silver,,,batch,s,1,0,1,1,0\n"))
	f.Add([]byte(demandHeader + ",id,renter,start_s,members,shards\n0,60,1,,silver,,,batch,a,0,0,1,3\n"))
	f.Add([]byte(demandHeader + ",id,renter,start_s,members,shards,max_parallel\n0,60,1,,silver,,,batch,a,0,0,1,3,4\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := ReadDemandCSV(bytes.NewReader(data), "fuzz.csv")
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := WriteDemandCSV(&out, d); err != nil {
			t.Fatalf("accepted but cannot write: %v", err)
		}
		back, err := ReadDemandCSV(bytes.NewReader(out.Bytes()), "again.csv")
		if err != nil {
			t.Fatalf("wrote what does not read back: %v\n%s", err, out.Bytes())
		}
		if !reflect.DeepEqual(back.Jobs, d.Jobs) || len(back.Renters) != len(d.Renters) {
			t.Fatalf("round trip changed the jobs:\n%+v\n%+v", d.Jobs, back.Jobs)
		}
	})
}
