#include "tensor/tensor.h"

#include <cstdlib>
#include <cstring>

namespace deepinfer {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

Tensor::Tensor(DType dtype, Shape shape, const void* data, std::shared_ptr<const void> owner)
    : dtype_(dtype), shape_(std::move(shape)), data_(data), owner_(std::move(owner)) {}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  const size_t bytes = static_cast<size_t>(shape_numel(shape)) * dtype_size(dtype);
  auto buf = std::shared_ptr<uint8_t[]>(new uint8_t[bytes > 0 ? bytes : 1]());
  const void* ptr = buf.get();
  return Tensor(dtype, std::move(shape), ptr, std::shared_ptr<const void>(buf, buf.get()));
}

}  // namespace deepinfer
