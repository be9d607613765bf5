#!/bin/sh
# gpu-check.sh: what `make gpu-check` runs (docs/INSTALL.md). It proves
# the node's GPU path on this host, without a network:
#
#   1. builds gleaner with cgo (NVML needs it: without cgo every host
#      looks GPU-less) and node/doctor/cudaprobe, a small program that
#      opens a CUDA context through the driver API (libcuda.so.1, dlopened:
#      no CUDA toolkit needed) and holds it;
#   2. on a host with an NVIDIA GPU (nvidia-smi -L lists one), packages
#      the probe FROM scratch with the glibc files ldd names, as the node's
#      image is (deploy/rootfs.sh), as the local image PROBE_IMAGE;
#   3. runs `gleaner doctor --gpu-check`: NVML inventory (timed), telemetry
#      of real readings signed and verified (timed), a container on one
#      GPU by UUID that must see it alone, then the probe as a job on that
#      GPU (lease to first CUDA call timed; CUDA must see that GPU alone;
#      its process must keep the GPU offered) and the probe on the host,
#      a process of no job, which must withdraw it.
#
# Without a GPU it prints "no NVIDIA GPU: skipped" and exits 0. Each step
# prints a line; any failure exits non-zero. Nothing is pulled.
set -eu

GO=${GO:-go}
BIN=${BIN:-bin/gleaner}
GPU_IMAGE=${GPU_IMAGE:-nvidia/cuda:12.4.1-base-ubuntu22.04}
PROBE_IMAGE=${PROBE_IMAGE:-gleaner-cudaprobe:local}
case $BIN in */*) ;; *) BIN=./$BIN ;; esac # run it from here, not from PATH

say() { printf 'gpu-check: %s\n' "$*"; }
die() { printf 'gpu-check: FAILED: %s\n' "$*" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT INT TERM
probe="$work/cudaprobe"

say "building $BIN with cgo"
mkdir -p "$(dirname "$BIN")"
CGO_ENABLED=1 $GO build -o "$BIN" ./cmd/gleaner || die "go build ./cmd/gleaner (cgo needs gcc and libc headers)"
say "building the CUDA probe (node/doctor/cudaprobe)"
CGO_ENABLED=1 $GO build -tags cudaprobe -o "$probe" ./node/doctor/cudaprobe || die "go build -tags cudaprobe ./node/doctor/cudaprobe"

if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
	# doctor says why (NVML not found, no device) in its skip line.
	say "nvidia-smi lists no GPU: the CUDA job checks will not run"
	exec "$BIN" doctor --gpu-check --gpu-image "$GPU_IMAGE"
fi

say "packaging the probe as $PROBE_IMAGE (FROM scratch, the glibc files ldd names)"
root="$work/image/root"
mkdir -p "$root/etc" "$root/tmp"
cp "$probe" "$root/cudaprobe"
ldd "$probe" | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}' >"$work/libs"
# libcuda.so.1, which the NVIDIA runtime mounts, needs glibc's libm,
# libdl, libpthread and librt beside libc (stubs since glibc 2.34).
libc=$(grep '/libc\.so\.6$' "$work/libs" || true)
[ -n "$libc" ] || die "ldd names no libc.so.6 for the probe: was it built with cgo?"
for l in libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1; do
	[ -e "$(dirname "$libc")/$l" ] && echo "$(dirname "$libc")/$l" >>"$work/libs"
done
while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done <"$work/libs"
printf '/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n/lib/aarch64-linux-gnu\n/usr/lib/aarch64-linux-gnu\n/usr/lib64\n' >"$root/etc/ld.so.conf"
printf 'FROM scratch\nCOPY root/ /\nENTRYPOINT ["/cudaprobe"]\n' >"$work/image/Dockerfile"
docker build -q -t "$PROBE_IMAGE" "$work/image" >/dev/null || die "docker build of $PROBE_IMAGE"

say "running gleaner doctor --gpu-check"
"$BIN" doctor --gpu-check --gpu-image "$GPU_IMAGE" --cuda-probe-image "$PROBE_IMAGE" --cuda-probe "$probe" ||
	die "a check failed (above: each failed check's fix); the probe image $PROBE_IMAGE is kept for a rerun"
say "passed; the probe image $PROBE_IMAGE is kept (docker rmi $PROBE_IMAGE removes it)"
