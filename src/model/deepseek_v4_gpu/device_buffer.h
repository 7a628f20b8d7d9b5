// DeviceBuffer: one owned device allocation (cuda_ops.h's device_alloc / device_free, or for
// sequence state the stream-ordered device_alloc_ordered / device_free_ordered, which never make
// the host wait), moved, never copied implicitly; clone() is an explicit device-to-device copy.
// Scratch: grow-only named workspaces a forward reuses across calls. Plain C++ over the CUDA op
// API (no CUDA headers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backend/cuda/cuda_ops.h"
#include "core/result.h"

namespace deepinfer::v4gpu {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), n_(o.n_), ordered_(o.ordered_) { o.p_ = nullptr, o.n_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      reset();
      p_ = o.p_, n_ = o.n_, ordered_ = o.ordered_;
      o.p_ = nullptr, o.n_ = 0;
    }
    return *this;
  }
  ~DeviceBuffer() { reset(); }

  /// Allocates `bytes` (contents undefined); an error names `what` when the device is full.
  static Result<DeviceBuffer> alloc(size_t bytes, const std::string& what);
  /// Allocates and fills with zeros.
  static Result<DeviceBuffer> zeros(size_t bytes, const std::string& what);
  /// Stream-ordered (cuda::device_alloc_ordered; contents undefined): the host does not wait for
  /// steps in flight, nor when the buffer is freed (reset, destruction) or cloned.
  static Result<DeviceBuffer> ordered(size_t bytes, const std::string& what);
  /// The same, zeroed on the device in that order.
  static Result<DeviceBuffer> ordered_zeros(size_t bytes, const std::string& what);
  /// Allocates and copies `bytes` from host memory.
  static Result<DeviceBuffer> upload(const void* src, size_t bytes, const std::string& what);
  template <class T>
  static Result<DeviceBuffer> upload(const std::vector<T>& v, const std::string& what) {
    return upload(v.data(), v.size() * sizeof(T), what);
  }
  /// A device copy (same size; stream-ordered when this buffer is).
  Result<DeviceBuffer> clone(const std::string& what) const;

  void reset();
  size_t bytes() const { return n_; }
  void* get() const { return p_; }
  template <class T>
  T* as() const { return static_cast<T*>(p_); }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
  bool ordered_ = false;
};

/// Device error of the last failed op, as a Status naming the call.
Status device_error(const std::string& what);
#define DI_CUDA_TRY(call)                                                        \
  do {                                                                           \
    if (!(call)) return ::deepinfer::v4gpu::device_error(#call);                 \
  } while (0)

/// Grow-only workspaces indexed by slot: get(slot, bytes) returns a buffer of at least `bytes`
/// (reallocated, after a device sync, only when it must grow). A pointer stays valid until the
/// same slot is asked for more. While frozen (a graph capture is recording the pointers), a
/// request that would grow a buffer is an error instead.
class Scratch {
 public:
  Result<void*> get(int slot, size_t bytes);
  size_t bytes() const;
  /// Counts reallocations: pointers handed out before a change may be stale.
  uint64_t generation() const { return generation_; }
  void set_frozen(bool on) { frozen_ = on; }

 private:
  std::vector<DeviceBuffer> bufs_;
  uint64_t generation_ = 0;
  bool frozen_ = false;
};

/// Grow-only pinned (page-locked) host memory: the device copies into it at the link's full
/// speed, where a copy into pageable memory is staged through a driver buffer.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { cuda::host_free_pinned(p_); }
  /// At least `bytes` (contents kept only while it does not grow).
  Result<void*> get(size_t bytes);

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace deepinfer::v4gpu
