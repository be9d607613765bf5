#!/bin/sh
# rootfs.sh ROOT: lay out the node image's root filesystem around
# ROOT/usr/local/bin/gleaner, which must already be built.
#
# The Dockerfile's build stage runs it, and so does testnet/deploy_test.go
# on the host, so the image a test starts has the same files as the one
# `docker build -f deploy/Dockerfile .` makes.
#
# Why libraries at all: gleaner is built with cgo, because go-nvml (the only
# way the node sees real GPUs) is cgo and dlopens libnvidia-ml.so.1 at run
# time. A cgo binary needs glibc's loader and libc; ldd names exactly those,
# so the image carries nothing else. The NVIDIA container toolkit mounts
# libnvidia-ml.so.1 into /usr/lib/x86_64-linux-gnu (or the arch's multiarch
# dir), which is on glibc's built-in search path. Built with CGO_ENABLED=0,
# ldd finds no library and the image is a plain static one (no real GPUs).
set -eu

root=${1:?usage: rootfs.sh ROOT (ROOT/usr/local/bin/gleaner must exist)}
bin="$root/usr/local/bin/gleaner"
uid=65532 # distroless's "nonroot": no account on a typical host has it
[ -x "$bin" ] || { echo "rootfs.sh: $bin is missing; build it first" >&2; exit 1; }

# The shared libraries, at the paths the binary asks for. `ldd` prints
# "name => /path (addr)" or "/path (addr)"; vdso has no file.
ldd "$bin" 2>/dev/null | awk '{for (i = 1; i <= NF; i++) if ($i ~ /^\//) print $i}' | while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done

# A passwd and group, so the numeric user has a name in `ps` and tools
# that look it up do not fail. No shell, no password.
mkdir -p "$root/etc"
printf 'root:x:0:0:root:/root:/sbin/nologin\ngleaner:x:%s:%s:gleaner:/var/lib/gleaner:/sbin/nologin\n' "$uid" "$uid" >"$root/etc/passwd"
printf 'root:x:0:\ngleaner:x:%s:\n' "$uid" >"$root/etc/group"

# CA roots. The node speaks libp2p (its own keys, no CA) and reaches
# registries only through the Docker engine, so nothing needs them today;
# they are 200 KB, and without them any later HTTPS call would fail in a
# way that is hard to tell from the network being down.
if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
	mkdir -p "$root/etc/ssl/certs"
	cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
fi

# /tmp, and /var/empty: the Dockerfile makes the repo directory (the
# VOLUME) from it with COPY --chown, the one way to give a directory an
# owner in an image with no shell, and one that needs no root here.
# /var/lib/gleaner itself must not exist yet, or COPY would keep its owner.
mkdir -p "$root/var/lib" "$root/var/empty" "$root/tmp"
chmod 0700 "$root/var/empty"
chmod 1777 "$root/tmp"
