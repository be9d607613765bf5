// Command demojob is the workload of `make demo` and of the end-to-end
// tests: a static binary, packaged FROM scratch, that reports where it runs
// and can be told to sleep, fail or checkpoint.
//
//	demojob [-sleep 2s] [-exit 0] [-lines 3] [-checkpoint /ckpt] [-read /data] [-write /outputs]
//	demojob -answer 100000   (a known-answer job: prints only a checkable result)
//	demojob -gang 2m         (a gang member: exchange with every rank of GLEANER_GANG_PEERS, docs/GANG_NETWORK.md)
//
// With -read and -write, the listing -read prints is also written to
// inputs.txt among the results.
package main

import (
	"context"
	"crypto/sha256"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gleaner-net/gleaner/testnet/demoimage"
	"github.com/gleaner-net/gleaner/testnet/gangcheck"
)

func main() {
	sleep := flag.Duration("sleep", 0, "how long to run")
	exit := flag.Int("exit", 0, "exit code")
	lines := flag.Int("lines", 3, "progress lines to print")
	ckpt := flag.String("checkpoint", "", "directory to resume from and checkpoint to on SIGTERM")
	answer := flag.Int("answer", 0, "known-answer mode: print sha256 iterated this many times over \"gleaner\" and exit")
	read := flag.String("read", "", "print the sha256 of every file under this directory (a job input), and whether it is writable")
	write := flag.String("write", "", "write results under this directory (a job's outputs): "+demoimage.ResultsDoc)
	gang := flag.Duration("gang", 0, "gang mode: exchange data with every rank in GLEANER_GANG_PEERS within this time, then exit")
	flag.Parse()
	if *gang > 0 {
		os.Exit(runGang(*gang))
	}
	// A shard of a job array says which, and writes it with its results,
	// so that a test sees each shard ran once with its own index.
	shard := ""
	if i := os.Getenv("GLEANER_SHARD_INDEX"); i != "" {
		shard = fmt.Sprintf("shard %s of %s\n", i, os.Getenv("GLEANER_SHARD_COUNT"))
		fmt.Print(shard)
	}
	// A gang's member says its rank, so that a test sees each member
	// was given its own.
	if r := os.Getenv("GLEANER_GANG_RANK"); r != "" {
		fmt.Printf("gang rank %s of %s\n", r, os.Getenv("GLEANER_GANG_SIZE"))
	}
	if *write != "" {
		if err := demoimage.WriteResults(*write); err != nil {
			fmt.Println("write failed:", err)
			os.Exit(1)
		}
		if shard != "" {
			if err := os.WriteFile(filepath.Join(*write, "shard.txt"), []byte(shard), 0o644); err != nil {
				fmt.Println("write failed:", err)
				os.Exit(1)
			}
		}
		fmt.Println("results written to", *write)
	}
	if *read != "" {
		listing, err := readTree(*read)
		if err != nil {
			fmt.Println("read failed:", err)
			os.Exit(1)
		}
		// With -write too, the listing is among the results, so that a
		// test reads what each shard of an array saw from its outputs.
		if *write != "" {
			if err := os.WriteFile(filepath.Join(*write, "inputs.txt"), []byte(listing), 0o644); err != nil {
				fmt.Println("write failed:", err)
				os.Exit(1)
			}
		}
	}
	if *answer > 0 {
		// Output that depends on nothing but the work: any honest provider
		// prints the same bytes, so their hash is a known answer.
		sum := sha256.Sum256([]byte("gleaner"))
		for i := 1; i < *answer; i++ {
			sum = sha256.Sum256(sum[:])
		}
		fmt.Printf("answer %d: %x\n", *answer, sum)
		return
	}

	fmt.Printf("hello from a gleaner job: uid %d, simulated GPUs %q, GPUs %q\n",
		os.Getuid(), os.Getenv("GLEANER_SIMULATED_GPUS"), os.Getenv("GLEANER_GPU_UUIDS"))
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	step := *sleep / time.Duration(max(*lines, 1))
	first := 1
	if *ckpt != "" {
		if b, err := os.ReadFile(filepath.Join(*ckpt, "state")); err == nil {
			if n, err := strconv.Atoi(strings.TrimPrefix(strings.TrimSpace(string(b)), "step=")); err == nil {
				first = n + 1
				fmt.Printf("resuming from checkpoint: step %d already done\n", n)
			}
		}
	}
	for i := first; i <= *lines; i++ {
		select {
		case <-term:
			if *ckpt != "" {
				state := fmt.Sprintf("step=%d\n", i-1)
				if err := os.WriteFile(filepath.Join(*ckpt, "state"), []byte(state), 0o600); err != nil {
					fmt.Println("checkpoint failed:", err)
				} else {
					fmt.Printf("SIGTERM: checkpointed after step %d\n", i-1)
				}
			} else {
				fmt.Println("SIGTERM: stopping early")
			}
			os.Exit(143)
		case <-time.After(step):
		}
		fmt.Printf("step %d/%d done\n", i, *lines)
	}
	fmt.Println("job finished")
	os.Exit(*exit)
}

// readTree prints "input <rel> <sha256>" for each file under dir, in
// name order, then whether a file could be created in any directory of
// it: what a test compares against the files the renter gave. It
// returns what it printed.
func readTree(dir string) (string, error) {
	var out strings.Builder
	writable := []string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if f, err := os.Create(filepath.Join(p, ".probe")); err == nil {
				f.Close()
				writable = append(writable, rel)
			}
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "input %s %x\n", rel, sha256.Sum256(b))
		return nil
	})
	if err != nil {
		return "", err
	}
	if len(writable) > 0 {
		fmt.Fprintf(&out, "input writable: yes (%s)\n", strings.Join(writable, " "))
	} else {
		fmt.Fprintln(&out, "input writable: no")
	}
	fmt.Print(out.String())
	return out.String(), nil
}

// runGang is the gang mode: 0 once every rank was reached and heard from.
func runGang(within time.Duration) int {
	cfg, err := gangcheck.FromEnv(os.Getenv, os.Stdout)
	if err != nil {
		fmt.Println("gang failed:", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := gangcheck.Run(ctx, cfg); err != nil {
		fmt.Println("gang failed:", err)
		return 1
	}
	return 0
}
