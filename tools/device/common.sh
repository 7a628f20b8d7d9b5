# Sourced by the tools/device/run_*.sh scripts (from the repository root on the GPU machine, with
# .device-deps carried): `log`, the device description in $OUT/env.txt, J = the CPU count,
# GoogleTest built from the carried sources into /tmp/gt (box 40 s), and tools/device/CMakeLists.txt
# configured into /tmp/bd (box 20 s; log in $OUT/build.log). Exits the calling script on failure.
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
log() { echo "== $* ($(date +%T))"; }
{
  log "device"; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,memory.used,memory.total --format=csv
  nvcc --version | tail -1; nproc
} 2>&1 | tee "$OUT/env.txt"
J=$(nproc)
log "googletest (box 40 s)"
timeout 40 bash -c "cmake -S .device-deps/googletest -B /tmp/gtb -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_GMOCK=OFF \
  -DCMAKE_INSTALL_PREFIX=/tmp/gt > /tmp/gt.log 2>&1 && ninja -C /tmp/gtb install >> /tmp/gt.log 2>&1" \
  || { tail -30 /tmp/gt.log; exit 1; }
log "configure (box 20 s)"
timeout 20 cmake -S tools/device -B /tmp/bd -G Ninja -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=/tmp/gt \
  > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
