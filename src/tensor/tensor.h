// Tensor: a handle (dtype, shape, byte pointer) over shared storage. It has no math: kernels
// live in backend/. Storage is either owned memory or a memory-mapped checkpoint region that
// the handle keeps alive. Row-major and contiguous; views share storage.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"

namespace deepinfer {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
std::string shape_to_string(const Shape& s);  // "[2, 3]"

enum class Device : uint8_t { kCpu, kCuda };

class Tensor {
 public:
  Tensor() = default;
  /// A view of `data` kept alive by `owner` (e.g. a mapped file).
  Tensor(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner);
  /// Owned, zero-initialised host memory.
  static Tensor zeros(DType dtype, Shape shape);

  bool defined() const { return data_ != nullptr || (numel() == 0 && owner_ != nullptr); }
  DType dtype() const { return dtype_; }
  Device device() const { return Device::kCpu; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i < 0 ? shape_.size() + i : i); }
  int rank() const { return static_cast<int>(shape_.size()); }
  int64_t numel() const { return shape_numel(shape_); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  const void* data() const { return data_; }
  void* mutable_data() { return const_cast<void*>(data_); }

  template <class T>
  std::span<const T> span() const {
    DI_CHECK(sizeof(T) == dtype_size(dtype_));
    return {static_cast<const T*>(data_), static_cast<size_t>(numel())};
  }
  template <class T>
  std::span<T> mutable_span() {
    DI_CHECK(sizeof(T) == dtype_size(dtype_));
    return {static_cast<T*>(mutable_data()), static_cast<size_t>(numel())};
  }

 private:
  DType dtype_ = DType::kF32;
  Shape shape_;
  const void* data_ = nullptr;
  std::shared_ptr<const void> owner_;
};

}  // namespace deepinfer
