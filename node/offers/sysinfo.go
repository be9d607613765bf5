package offers

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// hostMemoryMiB reads total memory from /proc/meminfo; 0 when unknown
// (offers then simply state no memory, and memory clauses do not match).
func hostMemoryMiB() int {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
			kb, _ := strconv.Atoi(strings.Fields(rest)[0])
			return kb / 1024
		}
	}
	return 0
}
