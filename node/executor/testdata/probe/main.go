// Command probe is the executor tests' workload: a static binary that runs
// in a FROM-scratch image and reports, from inside, what isolation it sees.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

func main() {
	mode := "hello"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "exit":
	case "hello":
		fmt.Println("hello from gleaner")
	case "isolation":
		isolation()
	case "trap": // checkpoint on SIGTERM, then exit 0
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		dir := os.Getenv("GLEANER_CHECKPOINT_PATH")
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte("step=42\n"), 0o600); err != nil {
			fmt.Println("checkpoint:", err)
			os.Exit(3)
		}
		fmt.Println("checkpointed")
	case "ignore": // a job that will not go quietly
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		time.Sleep(time.Hour)
	case "spam": // more output than the ring keeps
		line := strings.Repeat("x", 99) + "\n"
		for i := 0; i < 20000; i++ {
			os.Stdout.WriteString(line)
		}
		fmt.Println("end")
	default:
		fmt.Println("unknown mode", mode)
		os.Exit(2)
	}
}

type report struct {
	UID, GID     int
	RootWriteErr string
	TmpWriteErr  string
	CapEff       string
	NoNewPrivs   string
	Interfaces   []string
	Env          map[string]string
}

func isolation() {
	r := report{UID: os.Getuid(), GID: os.Getgid(), Env: map[string]string{}}
	if err := os.WriteFile("/probe-write", []byte("x"), 0o600); err != nil {
		r.RootWriteErr = err.Error()
	}
	if err := os.WriteFile("/tmp/probe-write", []byte("x"), 0o600); err != nil {
		r.TmpWriteErr = err.Error()
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "CapEff":
			r.CapEff = strings.TrimSpace(v)
		case "NoNewPrivs":
			r.NoNewPrivs = strings.TrimSpace(v)
		}
	}
	dev, _ := os.ReadFile("/proc/net/dev")
	for _, line := range strings.Split(string(dev), "\n") {
		if name, _, ok := strings.Cut(line, ":"); ok && !strings.Contains(name, "|") {
			r.Interfaces = append(r.Interfaces, strings.TrimSpace(name))
		}
	}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		r.Env[k] = v
	}
	json.NewEncoder(os.Stdout).Encode(r)
}
