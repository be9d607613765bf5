// Command probe is the executor tests' workload: a static binary that runs
// in a FROM-scratch image and reports, from inside, what isolation it sees.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
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
	case "spawn": // a child process (the probe's "ignore"); print its PID, then wait
		child, err := os.StartProcess("/proc/self/exe", []string{os.Args[0], "ignore"},
			&os.ProcAttr{Files: []*os.File{nil, nil, os.Stderr}})
		if err != nil {
			fmt.Println("spawn:", err)
			os.Exit(3)
		}
		fmt.Printf("child %d\n", child.Pid)
		_, _ = child.Wait()
	case "count": // count N MS CODE: print "tick i" every MS ms, N times, then exit CODE
		n, ms, code := atoi(os.Args[2]), atoi(os.Args[3]), atoi(os.Args[4])
		for i := 1; i <= n; i++ {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			fmt.Printf("tick %d\n", i)
		}
		os.Exit(code)
	case "spam": // more output than the ring keeps
		line := strings.Repeat("x", 99) + "\n"
		for i := 0; i < 20000; i++ {
			os.Stdout.WriteString(line)
		}
		fmt.Println("end")
	case "fill": // fill DIR MIB: write up to MIB MiB into DIR/fill
		fill(os.Args[2], atoi(os.Args[3]))
	case "files": // files DIR N: create up to N empty files in DIR
		files(os.Args[2], atoi(os.Args[3]))
	case "write": // write DIR exit|hold NAME=SIZE...: write files (see write)
		write(os.Args[2], os.Args[3] == "hold", os.Args[4:])
	case "mounts": // every mount this process can write to
		mounts()
	case "resume": // print the restored checkpoint, then write the next one
		dir := os.Getenv("GLEANER_CHECKPOINT_PATH")
		state, err := os.ReadFile(filepath.Join(dir, "state"))
		if err != nil {
			fmt.Println("resume:", err)
			os.Exit(3)
		}
		fmt.Printf("resumed %s", state)
		if err := os.WriteFile(filepath.Join(dir, "state"), []byte("step=43\n"), 0o600); err != nil {
			fmt.Println("checkpoint:", err)
			os.Exit(3)
		}
	case "input": // input FILE DIR: print FILE, then try to write in DIR
		input(os.Args[2], os.Args[3])
	case "watch": // watch FILE N MS: print FILE as "read i: ..." every MS ms, N times
		n, ms := atoi(os.Args[3]), atoi(os.Args[4])
		for i := 1; i <= n; i++ {
			time.Sleep(time.Duration(ms) * time.Millisecond)
			b, err := os.ReadFile(os.Args[2])
			if err != nil {
				fmt.Printf("read %d: error %v\n", i, err)
				continue
			}
			fmt.Printf("read %d: %s\n", i, b)
		}
	case "serve": // serve PORT: answer every TCP connection with "pong"
		serve(os.Args[2])
	case "dial": // dial HOST:PORT: one connection, 3 s to connect
		dial(os.Args[2])
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

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		fmt.Println("bad number", s)
		os.Exit(2)
	}
	return n
}

// writeResult is what fill and files report, as one JSON line.
type writeResult struct {
	Wrote int64  // bytes (fill) or files (files)
	Err   string // the error that stopped it, "" if it did all it was asked
}

func fill(dir string, mib int) {
	var r writeResult
	f, err := os.Create(filepath.Join(dir, "fill"))
	if err == nil {
		buf := make([]byte, 1<<20)
		for i := 0; i < mib && err == nil; i++ {
			var n int
			n, err = f.Write(buf)
			r.Wrote += int64(n)
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		r.Err = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(r)
}

func files(dir string, n int) {
	var r writeResult
	for i := 0; i < n; i++ {
		f, err := os.Create(filepath.Join(dir, fmt.Sprintf("f%d", i)))
		if err != nil {
			r.Err = err.Error()
			break
		}
		f.Close()
		r.Wrote++
	}
	json.NewEncoder(os.Stdout).Encode(r)
}

// mountReport is one mount the probe could create a file in (directories)
// or open for writing (files).
type mountReport struct {
	Path, FSType, Options string
	SizeBytes             int64 // from statfs: the most it can hold
	CharDevice            bool  // a device bound over the path (masked paths get /dev/null)
}

func mounts() {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		fmt.Println("mountinfo:", err)
		os.Exit(3)
	}
	out := []mountReport{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS...] - FSTYPE SOURCE SUPEROPTS
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if !ok || len(f) < 6 || len(g) < 3 {
			continue
		}
		path := strings.ReplaceAll(f[4], "\\040", " ")
		if !writable(path) {
			continue
		}
		var st syscall.Statfs_t
		_ = syscall.Statfs(path, &st)
		fi, _ := os.Stat(path)
		out = append(out, mountReport{Path: path, FSType: g[0], Options: g[2], SizeBytes: int64(st.Blocks) * st.Bsize,
			CharDevice: fi != nil && fi.Mode()&os.ModeCharDevice != 0})
	}
	json.NewEncoder(os.Stdout).Encode(out)
}

func writable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	if !fi.IsDir() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0) // no O_TRUNC: changes nothing
		if err != nil {
			return false
		}
		f.Close()
		return true
	}
	f, err := os.CreateTemp(path, ".probe-")
	if err != nil {
		return false
	}
	f.Close()
	os.Remove(f.Name())
	return true
}

// inputResult is what input reports, as one JSON line.
type inputResult struct {
	Read     string // FILE's contents
	ReadErr  string
	WriteErr string // why a file could not be created in DIR; "" if it was
	Env      string // GLEANER_INPUT_0
}

func input(file, dir string) {
	r := inputResult{Env: os.Getenv("GLEANER_INPUT_0")}
	b, err := os.ReadFile(file)
	r.Read = string(b)
	if err != nil {
		r.ReadErr = err.Error()
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), []byte("x"), 0o600); err != nil {
		r.WriteErr = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(r)
}

func serve(port string) {
	l, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Println("listen:", err)
		os.Exit(3)
	}
	fmt.Println("listening")
	for {
		c, err := l.Accept()
		if err != nil {
			continue
		}
		c.Write([]byte("pong\n"))
		c.Close()
	}
}

// dialResult is what dial reports, as one JSON line.
type dialResult struct {
	Reply, Err string
}

func dial(addr string) {
	var r dialResult
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err == nil {
		c.SetDeadline(time.Now().Add(3 * time.Second))
		var b []byte
		b, err = io.ReadAll(c)
		r.Reply = string(b)
		c.Close()
	}
	if err != nil {
		r.Err = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(r)
}

// treeResult is what write reports, as one JSON line.
type treeResult struct {
	Dir   string // where it wrote
	Wrote int64  // bytes
	Err   string // the error that stopped it, "" if it wrote everything
}

// write creates each NAME (a relative path, its directories made as
// needed) in DIR with SIZE bytes of FileContent(NAME, SIZE); DIR "-" is
// $GLEANER_OUTPUTS. With hold it then waits for SIGTERM and exits 0.
func write(dir string, hold bool, specs []string) {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM)
	if dir == "-" {
		dir = os.Getenv("GLEANER_OUTPUTS")
	}
	r := treeResult{Dir: dir}
	for _, spec := range specs {
		name, size, _ := strings.Cut(spec, "=")
		p := filepath.Join(dir, name)
		err := os.MkdirAll(filepath.Dir(p), 0o700)
		if err == nil {
			var n int
			n, err = writeFile(p, FileContent(name, atoi(size)))
			r.Wrote += int64(n)
		}
		if err != nil {
			r.Err = err.Error()
			break
		}
	}
	json.NewEncoder(os.Stdout).Encode(r)
	if hold {
		<-c
	}
}

func writeFile(p string, data []byte) (int, error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// FileContent is what write puts in a file: NAME and a bar, repeated,
// cut to size (the tests compute the same).
func FileContent(name string, size int) []byte {
	unit := name + "|"
	return []byte(strings.Repeat(unit, size/len(unit)+1)[:size])
}
