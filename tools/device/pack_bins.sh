#!/usr/bin/env bash
# Here (the development machine): copy binaries built in a full-tree CUDA build (e.g. build-hH:
# deepinfer, cuda_v4_engine_test) and the shared libraries they need that the GPU machine lacks
# (cpp-httplib, utf8proc, xxhash, OpenSSL, zlib, brotli; libstdc++ apart, in lib-stdcxx/, used
# only when the machine's own is too old) into the ignored folder .device-bin/, to be named in
# the device call's `carry`. glibc, libgcc and the CUDA libraries come from the GPU machine.
# The binaries and libraries are stripped and also packed into .device-bin.tar.xz (the CUDA code
# compresses about 5x): carry that and run `tar xJf .device-bin.tar.xz` first on the device when
# .device-bin itself would pass the carry limit (64 MiB with the tree).
# Usage: tools/device/pack_bins.sh BINARY...
set -euo pipefail
cd "$(dirname "$0")/../.."
rm -rf .device-bin && mkdir -p .device-bin/bin .device-bin/lib .device-bin/lib-stdcxx
SKIP='linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libgcc_s|libcudart|libcublas|libcuda\.so'
for b in "$@"; do
  cp "$b" .device-bin/bin/
  ldd "$b" | awk '/=> \// {print $3}' | grep -vE "$SKIP" | while read -r lib; do
    case "$lib" in
      *libstdc++*) cp -L "$lib" .device-bin/lib-stdcxx/ ;;
      *) cp -L "$lib" .device-bin/lib/ ;;
    esac
  done
done
# (a binary may need none of the carried libraries: lib/ can be empty)
find .device-bin/bin .device-bin/lib -type f -exec strip --strip-unneeded {} +
# xz -9: its 64 MiB dictionary sees the repeats between carried builds of one binary (three deepinfers
# 24 -> 9 MB)
tar cf - .device-bin | xz -9 -T2 > .device-bin.tar.xz
du -sh .device-bin .device-bin.tar.xz; ls .device-bin/bin .device-bin/lib .device-bin/lib-stdcxx
