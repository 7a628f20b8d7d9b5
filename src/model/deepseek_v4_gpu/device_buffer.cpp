#include "model/deepseek_v4_gpu/device_buffer.h"

namespace deepinfer::v4gpu {

Status device_error(const std::string& what) {
  return Status::internal("CUDA: " + what + " failed: " + cuda::last_error());
}

Result<DeviceBuffer> DeviceBuffer::alloc(size_t bytes, const std::string& what) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  b.p_ = cuda::device_alloc(bytes);
  if (!b.p_) return Status::resource_exhausted("CUDA: cannot allocate " + std::to_string(bytes) + " bytes for " + what);
  b.n_ = bytes;
  return b;
}

Result<DeviceBuffer> DeviceBuffer::zeros(size_t bytes, const std::string& what) {
  const std::vector<uint8_t> z(bytes, 0);
  return upload(z.data(), bytes, what);
}

Result<DeviceBuffer> DeviceBuffer::ordered(size_t bytes, const std::string& what) {
  DeviceBuffer b;
  if (bytes == 0) return b;
  b.p_ = cuda::device_alloc_ordered(bytes);
  if (!b.p_) return Status::resource_exhausted("CUDA: cannot allocate " + std::to_string(bytes) + " bytes for " + what);
  b.n_ = bytes, b.ordered_ = true;
  return b;
}

Result<DeviceBuffer> DeviceBuffer::ordered_zeros(size_t bytes, const std::string& what) {
  DI_ASSIGN_OR_RETURN(DeviceBuffer b, ordered(bytes, what));
  if (bytes && !cuda::memset_ordered(b.p_, 0, bytes)) return device_error("zeroing of " + what);
  return b;
}

Result<DeviceBuffer> DeviceBuffer::upload(const void* src, size_t bytes, const std::string& what) {
  DI_ASSIGN_OR_RETURN(DeviceBuffer b, alloc(bytes, what));
  if (bytes && !cuda::copy_to_device(b.p_, src, bytes)) return device_error("upload of " + what);
  return b;
}

Result<DeviceBuffer> DeviceBuffer::clone(const std::string& what) const {
  if (ordered_) {
    DI_ASSIGN_OR_RETURN(DeviceBuffer b, ordered(n_, what));
    if (n_ && !cuda::copy_ordered(b.p_, p_, n_)) return device_error("copy of " + what);
    return b;
  }
  DI_ASSIGN_OR_RETURN(DeviceBuffer b, alloc(n_, what));
  if (n_ && !cuda::copy_device_to_device(b.p_, p_, n_)) return device_error("copy of " + what);
  return b;
}

void DeviceBuffer::reset() {
  if (p_) ordered_ ? cuda::device_free_ordered(p_) : cuda::device_free(p_);
  p_ = nullptr, n_ = 0, ordered_ = false;
}

Result<void*> Scratch::get(int slot, size_t bytes) {
  if (slot < 0) return Status::internal("scratch slot < 0");
  if (static_cast<size_t>(slot) >= bufs_.size()) bufs_.resize(slot + 1);
  DeviceBuffer& b = bufs_[slot];
  if (b.bytes() < bytes) {
    if (frozen_) return Status::internal("workspace " + std::to_string(slot) + " would grow during a graph capture");
    ++generation_;
    if (!cuda::synchronize()) return device_error("synchronize before growing a workspace");
    b.reset();
    // Round up so that slowly growing requests do not reallocate every call.
    size_t n = 256;
    while (n < bytes) n *= 2;
    DI_ASSIGN_OR_RETURN(b, DeviceBuffer::alloc(n, "workspace " + std::to_string(slot)));
  }
  return b.get();
}

Result<void*> PinnedBuffer::get(size_t bytes) {
  if (bytes <= n_) return p_;
  cuda::host_free_pinned(p_);
  p_ = nullptr, n_ = 0;
  p_ = cuda::host_alloc_pinned(bytes);
  if (!p_) return Status::resource_exhausted("CUDA: cannot allocate " + std::to_string(bytes) + " bytes of pinned host memory");
  n_ = bytes;
  return p_;
}

size_t Scratch::bytes() const {
  size_t s = 0;
  for (const DeviceBuffer& b : bufs_) s += b.bytes();
  return s;
}

}  // namespace deepinfer::v4gpu
