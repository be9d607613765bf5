//go:build cudaprobe && linux && cgo

// Command cudaprobe opens a CUDA context on the first GPU it can see and
// holds it, so that the driver lists it as a compute process: `make
// gpu-check` runs it as a job in a container given one leased GPU, and
// once on the host as a process of no job (node/doctor/gpucheck_job.go).
// It dlopens libcuda.so.1 (which the NVIDIA runtime mounts into a GPU
// container) through the driver API, so it builds without the CUDA
// toolkit's headers; the build tag keeps it out of ordinary builds:
//
//	CGO_ENABLED=1 go build -tags cudaprobe -o cudaprobe ./node/doctor/cudaprobe
//
// It prints one line once the context exists (ProbeLine in
// node/doctor), then sleeps for -hold; a failing step exits 1 naming it
// and the driver's CUresult.
package main

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>

typedef int (*cuInit_t)(unsigned int);
typedef int (*cuDeviceGetCount_t)(int *);
typedef int (*cuDeviceGet_t)(int *, int);
typedef int (*cuDeviceGetUuid_t)(unsigned char *, int); // CUuuid: 16 bytes
typedef int (*cuCtxCreate_t)(void **, unsigned int, int);
typedef int (*cuMemAlloc_t)(unsigned long long *, size_t);

// probe runs the driver API's first calls; on failure *step names the
// call and the result is its CUresult (-1: the library or a symbol is
// missing).
static int probe(const char **step, int *count, unsigned char uuid[16]) {
	*step = "dlopen libcuda.so.1";
	void *lib = dlopen("libcuda.so.1", RTLD_NOW);
	if (!lib) return -1;
	cuInit_t cuInit = (cuInit_t)dlsym(lib, "cuInit");
	cuDeviceGetCount_t cuDeviceGetCount = (cuDeviceGetCount_t)dlsym(lib, "cuDeviceGetCount");
	cuDeviceGet_t cuDeviceGet = (cuDeviceGet_t)dlsym(lib, "cuDeviceGet");
	cuDeviceGetUuid_t cuDeviceGetUuid = (cuDeviceGetUuid_t)dlsym(lib, "cuDeviceGetUuid");
	cuCtxCreate_t cuCtxCreate = (cuCtxCreate_t)dlsym(lib, "cuCtxCreate_v2");
	cuMemAlloc_t cuMemAlloc = (cuMemAlloc_t)dlsym(lib, "cuMemAlloc_v2");
	*step = "dlsym";
	if (!cuInit || !cuDeviceGetCount || !cuDeviceGet || !cuDeviceGetUuid || !cuCtxCreate || !cuMemAlloc) return -1;
	int r, dev;
	void *ctx;
	unsigned long long mem;
	*step = "cuInit";
	if ((r = cuInit(0)) != 0) return r;
	*step = "cuDeviceGetCount";
	if ((r = cuDeviceGetCount(count)) != 0) return r;
	*step = "cuDeviceGet";
	if ((r = cuDeviceGet(&dev, 0)) != 0) return r;
	*step = "cuDeviceGetUuid";
	if ((r = cuDeviceGetUuid(uuid, dev)) != 0) return r;
	*step = "cuCtxCreate";
	if ((r = cuCtxCreate(&ctx, 0, dev)) != 0) return r;
	*step = "cuMemAlloc"; // 64 MiB, so the process shows memory in use
	if ((r = cuMemAlloc(&mem, 64u << 20)) != 0) return r;
	return 0;
}
*/
import "C"

import (
	"flag"
	"fmt"
	"os"
	"time"
	"unsafe"
)

func main() {
	hold := flag.Duration("hold", 30*time.Second, "how long to hold the context before exiting")
	flag.Parse()
	var step *C.char
	var count C.int
	var uuid [16]byte
	if r := C.probe(&step, &count, (*C.uchar)(unsafe.Pointer(&uuid[0]))); r != 0 {
		why := fmt.Sprintf("CUresult %d", int(r))
		if r == -1 {
			why = "not found: is the NVIDIA driver's libcuda.so.1 visible here?"
		}
		fmt.Fprintf(os.Stderr, "cudaprobe: %s failed (%s)\n", C.GoString(step), why)
		os.Exit(1)
	}
	u := uuid
	// As NVML and nvidia-smi write a GPU's UUID.
	id := fmt.Sprintf("GPU-%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
	fmt.Printf("cudaprobe: context on %s, %d device(s) visible, pid %d\n", id, int(count), os.Getpid())
	time.Sleep(*hold)
}
