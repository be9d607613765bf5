// Command demojob is the workload of `make demo` and of the end-to-end
// tests: a static binary, packaged FROM scratch, that reports where it runs
// and can be told to sleep, fail or checkpoint.
//
//	demojob [-sleep 2s] [-exit 0] [-lines 3]
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	sleep := flag.Duration("sleep", 0, "how long to run")
	exit := flag.Int("exit", 0, "exit code")
	lines := flag.Int("lines", 3, "progress lines to print")
	flag.Parse()

	fmt.Printf("hello from a gleaner job: uid %d, simulated GPUs %q, GPUs %q\n",
		os.Getuid(), os.Getenv("GLEANER_SIMULATED_GPUS"), os.Getenv("GLEANER_GPU_UUIDS"))
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	step := *sleep / time.Duration(max(*lines, 1))
	for i := 1; i <= *lines; i++ {
		select {
		case <-term:
			fmt.Println("SIGTERM: stopping early")
			os.Exit(143)
		case <-time.After(step):
		}
		fmt.Printf("step %d/%d done\n", i, *lines)
	}
	fmt.Println("job finished")
	os.Exit(*exit)
}
