// Shared helpers of the CUDA op set (device code only; never included outside backend/cuda).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>

#include "backend/cuda/cuda_ops.h"

namespace deepinfer::cuda::detail {

void set_error(const std::string& msg);
inline bool fail(const std::string& msg) {
  set_error(msg);
  return false;
}
/// After a launch: records and returns false on a launch error.
inline bool check_launch(const char* what) {
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) return fail(std::string(what) + ": " + cudaGetErrorString(e));
  return true;
}
inline bool check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) return fail(std::string(what) + ": " + cudaGetErrorString(e));
  return true;
}
inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

/// Programmatic dependent launch (PDL). The per-step kernels are launched with launch_pdl, which
/// lets the next kernel of the stream start (blocks resident, prologue) while the one before it
/// drains, and every kernel so launched begins with pdl_entry(): it waits until the grids it
/// depends on have completed and their writes are visible, then (small grids, below) lets its
/// own dependents launch. Nothing a kernel computes from is read before the wait (the fp8 GEMV
/// reads its weights, which no kernel writes), so the order of memory effects is the plain stream
/// order's; what overlaps is launch latency and tail drain. A kernel launched with launch_pdl must
/// wait first; kernels launched plainly (the load-time ones) may call it too (a no-op there). In
/// a CUDA graph the launches become programmatic edges. Before SM90 all of it is a no-op.

/// griddepcontrol.wait: the grids this one depends on have completed, their writes visible.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
/// griddepcontrol.launch_dependents: the next kernel may launch once every block got here.
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
/// The wait, then the trigger for a grid of at most one block per SM; a larger grid leaves it to
/// its exit. Measured on the H200 (device time per decode step): letting dependents launch at the
/// start of every grid took the EP slice at batch 256 from 34.4 to 35.1 ms (without any trigger:
/// 33.7) while it took v4-flash-4 at batch 1 from 1.26 to 1.16 ms. At batch 256 most kernels are
/// one block per token: their dependents, launched early, sit on the SMs beside them. The fp8
/// GEMV (decode up to 64 rows) triggers itself once its first weights are loaded, at any grid size.
__device__ __forceinline__ void pdl_trigger_one_wave() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  uint32_t sms;
  asm("mov.u32 %0, %%nsmid;" : "=r"(sms));
  if (gridDim.x * gridDim.y * gridDim.z <= sms) pdl_trigger();
#endif
}
__device__ __forceinline__ void pdl_entry() {
  pdl_wait();
  pdl_trigger_one_wave();
}

/// The launch attribute of launch_pdl (for launches that build their own cudaLaunchConfig_t).
inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  return a;
}

/// `kernel<<<grid, block, smem, stream>>>(args...)` with PDL and, for a cluster of more than one
/// block, in clusters of that shape (e.g. (1, 4, 1): blockIdx.y / 4 names the cluster, blockIdx.y %
/// 4 the block's rank in it); errors land where check_launch reads them (cudaGetLastError).
template <class... KArgs, class... Args>
void launch_pdl_cluster(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                        dim3 cluster, Args&&... args) {
  cudaLaunchAttribute attr[2] = {pdl_attribute(), {}};
  attr[1].id = cudaLaunchAttributeClusterDimension;
  attr[1].val.clusterDim.x = cluster.x;
  attr[1].val.clusterDim.y = cluster.y;
  attr[1].val.clusterDim.z = cluster.z;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = cluster.x * cluster.y * cluster.z > 1 ? 2 : 1;
  (void)cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

/// `kernel<<<grid, block, smem, stream>>>(args...)` with PDL (no clusters).
template <class... KArgs, class... Args>
void launch_pdl(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_pdl_cluster(kernel, grid, block, smem, stream, dim3(1, 1, 1), std::forward<Args>(args)...);
}

/// Every thread of every block of the cluster arrives, then waits (release / acquire at cluster
/// scope: each thread's memory operations before it, shared and global, are seen by all after it).
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// The address of `saddr` (this block's shared memory) in the cluster's block `rank`.
__device__ __forceinline__ uint32_t dsmem_addr(uint32_t saddr, uint32_t rank) {
  uint32_t a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"(saddr), "r"(rank));
  return a;
}
// Four floats to the cluster shared-memory address `a` (16-byte aligned).
__device__ __forceinline__ void st_dsmem_f32x4(uint32_t a, float v0, float v1, float v2, float v3) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(a), "f"(v0), "f"(v1), "f"(v2), "f"(v3)
               : "memory");
}

/// SM count of the current device (132, an H100/H200's, if it cannot be read: launch shapes that
/// use it only change speed).
inline int sm_count() {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      n <= 0) {
    cudaGetLastError();
    return 132;
  }
  return n;
}

/// Raises a kernel's dynamic shared-memory limit on the current device unless `done` (one bit per
/// device, owned by the caller's kernel) says it was already raised there.
inline bool max_dynamic_smem_once(const void* func, int bytes, std::atomic<uint64_t>& done, const char* what) {
  int dev = 0;
  if (!check(cudaGetDevice(&dev), what)) return false;
  const uint64_t bit = uint64_t(1) << (dev & 63);
  if (done.load(std::memory_order_acquire) & bit) return true;
  if (!check(cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), what)) return false;
  done.fetch_or(bit, std::memory_order_acq_rel);
  return true;
}

/// E8M0 byte -> fp32 power of two (0xff -> NaN), exact.
__device__ __forceinline__ float e8m0_to_float(uint32_t e) {
  if (e == 0xffu) return __int_as_float(0x7fc00000);
  if (e == 0u) return 5.877471754111438e-39f;  // 2^-127 (denormal)
  return __int_as_float(static_cast<int>(e << 23));
}

__device__ __forceinline__ uint4 ldg_nc_v4(const void* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
               : "l"(p));
  return r;
}
__device__ __forceinline__ uint32_t ldg_nc_u32(const void* p) {
  uint32_t r;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}

}  // namespace deepinfer::cuda::detail
