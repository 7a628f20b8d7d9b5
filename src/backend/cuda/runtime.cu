// Memory, copies and errors of the CUDA op set.
#include <algorithm>

#include "backend/cuda/cuda_common.cuh"

namespace deepinfer::cuda {

namespace detail {
namespace {
thread_local std::string g_last_error;
}
void set_error(const std::string& msg) { g_last_error = msg; }
}  // namespace detail

using detail::check;

const std::string& last_error() { return detail::g_last_error; }

bool device_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // clear the sticky "no device" error
    return false;
  }
  return true;
}

namespace {
// The current device's default pool, its release threshold raised once per device so that blocks
// freed by device_free_ordered stay in the pool for the next state instead of going back to the
// driver at each synchronisation.
cudaMemPool_t ordered_pool() {
  static std::atomic<uint64_t> raised{0};
  int dev = 0;
  cudaMemPool_t pool = nullptr;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  const uint64_t bit = uint64_t{1} << (dev & 63);
  if (!(raised.load() & bit)) {
    uint64_t keep = UINT64_MAX;
    if (cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep) == cudaSuccess) raised |= bit;
    cudaGetLastError();
  }
  return pool;
}
}  // namespace

void* device_alloc(size_t bytes) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    // The ordered pool may hold freed state blocks: hand them back to the driver, try once more.
    cudaGetLastError();
    cudaMemPool_t pool = ordered_pool();
    if (pool && cudaDeviceSynchronize() == cudaSuccess && cudaMemPoolTrimTo(pool, 0) == cudaSuccess)
      e = cudaMalloc(&p, bytes);
  }
  if (!check(e, "cudaMalloc")) {
    cudaGetLastError();
    return nullptr;
  }
  return p;
}
void device_free(void* p) {
  if (p) cudaFree(p);
}
void* device_alloc_ordered(size_t bytes) {
  cudaMemPool_t pool = ordered_pool();
  void* p = nullptr;
  if (!pool) {
    detail::fail("device_alloc_ordered: no default memory pool");
    return nullptr;
  }
  if (!check(cudaMallocFromPoolAsync(&p, bytes, pool, cudaStreamLegacy), "cudaMallocFromPoolAsync")) {
    cudaGetLastError();  // out of memory is not sticky: no later launch check should see it
    return nullptr;
  }
  return p;
}
bool device_memory_info(size_t* free_bytes, size_t* total_bytes) {
  if (!check(cudaMemGetInfo(free_bytes, total_bytes), "cudaMemGetInfo")) return false;
  // Blocks the ordered pool holds for reuse are free to new state though the driver counts them used.
  if (cudaMemPool_t pool = ordered_pool()) {
    uint64_t reserved = 0, used = 0;
    if (cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess &&
        cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess && reserved > used)
      *free_bytes = std::min<size_t>(*total_bytes, *free_bytes + (reserved - used));
    cudaGetLastError();
  }
  return true;
}
void device_free_ordered(void* p) {
  if (p && cudaFreeAsync(p, cudaStreamLegacy) != cudaSuccess) cudaGetLastError();
}
bool memset_ordered(void* p, int value, size_t bytes) {
  return check(cudaMemsetAsync(p, value, bytes, cudaStreamLegacy), "memset_ordered");
}
bool copy_ordered(void* dst, const void* src, size_t bytes) {
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamLegacy), "copy_ordered");
}
bool copy_to_device(void* dst, const void* src, size_t bytes) {
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "copy_to_device");
}
bool copy_to_host(void* dst, const void* src, size_t bytes) {
  return check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "copy_to_host");
}
bool copy_device_to_device(void* dst, const void* src, size_t bytes, void* stream) {
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, detail::as_stream(stream)),
               "copy_device_to_device");
}
bool synchronize() { return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
bool copy_to_device_async(void* dst, const void* src, size_t bytes, void* stream) {
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, detail::as_stream(stream)),
               "copy_to_device_async");
}
bool copy_to_host_async(void* dst, const void* src, size_t bytes, void* stream) {
  return check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, detail::as_stream(stream)),
               "copy_to_host_async");
}
void* host_alloc_pinned(size_t bytes) {
  void* p = nullptr;
  if (!check(cudaMallocHost(&p, bytes), "cudaMallocHost")) return nullptr;
  return p;
}
void host_free_pinned(void* p) {
  if (p) cudaFreeHost(p);
}
void* stream_create() {
  cudaStream_t s = nullptr;
  if (!check(cudaStreamCreate(&s), "cudaStreamCreate")) return nullptr;
  return s;
}
void stream_destroy(void* stream) {
  if (stream) cudaStreamDestroy(static_cast<cudaStream_t>(stream));
}
bool stream_synchronize(void* stream) {
  return check(cudaStreamSynchronize(detail::as_stream(stream)), "cudaStreamSynchronize");
}

void* event_create() {
  cudaEvent_t e = nullptr;
  if (!check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate")) return nullptr;
  return e;
}
void* timed_event_create() {
  cudaEvent_t e = nullptr;
  if (!check(cudaEventCreate(&e), "cudaEventCreate (timed)")) return nullptr;
  return e;
}
bool event_synchronize(void* event) {
  return check(cudaEventSynchronize(static_cast<cudaEvent_t>(event)), "cudaEventSynchronize");
}
bool event_elapsed_ms(void* start, void* end, float* ms) {
  return check(cudaEventElapsedTime(ms, static_cast<cudaEvent_t>(start), static_cast<cudaEvent_t>(end)),
               "cudaEventElapsedTime");
}
void event_destroy(void* event) {
  if (event) cudaEventDestroy(static_cast<cudaEvent_t>(event));
}
bool event_record(void* event, void* stream) {
  return check(cudaEventRecord(static_cast<cudaEvent_t>(event), detail::as_stream(stream)), "cudaEventRecord");
}
bool stream_wait_event(void* waiter, void* event) {
  return check(cudaStreamWaitEvent(detail::as_stream(waiter), static_cast<cudaEvent_t>(event), 0),
               "cudaStreamWaitEvent");
}

bool graph_begin_capture(void* stream) {
  return check(cudaStreamBeginCapture(detail::as_stream(stream), cudaStreamCaptureModeThreadLocal),
               "cudaStreamBeginCapture");
}
void* graph_end_capture(void* stream) {
  cudaGraph_t graph = nullptr;
  const cudaError_t e = cudaStreamEndCapture(detail::as_stream(stream), &graph);
  if (e != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    check(e, "cudaStreamEndCapture");
    return nullptr;
  }
  cudaGraphExec_t exec = nullptr;
  const cudaError_t ie = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  if (!check(ie, "cudaGraphInstantiate")) return nullptr;
  return exec;
}
bool graph_launch(void* exec, void* stream) {
  return check(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec), detail::as_stream(stream)), "cudaGraphLaunch");
}
void graph_destroy(void* exec) {
  if (exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
}

namespace {
__global__ void fill_random_kernel(uint32_t* p, size_t words, uint64_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < words; i += size_t(gridDim.x) * blockDim.x) {
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (i + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    p[i] = static_cast<uint32_t>(z ^ (z >> 31));
  }
}
}  // namespace

bool fill_random_bytes(void* dst, size_t bytes, uint64_t seed, void* stream) {
  if (bytes % 4) return detail::fail("fill_random_bytes: bytes % 4 != 0");
  fill_random_kernel<<<1024, 256, 0, detail::as_stream(stream)>>>(static_cast<uint32_t*>(dst), bytes / 4, seed);
  return detail::check_launch("fill_random_bytes");
}

}  // namespace deepinfer::cuda
