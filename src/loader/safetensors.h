// SafetensorsFile: one memory-mapped .safetensors file with its header parsed and validated
// (dtype names, shapes, data offsets inside the file, sizes that match dtype x shape, no two
// tensors overlapping). Tensors returned are views into the mapping, kept alive by it.
// Immutable after open(); safe to share between threads.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "tensor/tensor.h"

namespace deepinfer {

struct TensorInfo {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0;  // byte offsets relative to the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  /// Maps `path` and validates its header; errors name the file and the tensor.
  static Result<std::shared_ptr<const SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();

  const std::string& path() const { return path_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const TensorInfo* find(std::string_view name) const;
  /// A view of the tensor's bytes inside the mapping.
  Tensor tensor(const TensorInfo& info) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  void* map_ = nullptr;
  size_t map_size_ = 0;
  const uint8_t* data_ = nullptr;  // start of the data section
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  std::weak_ptr<const SafetensorsFile> self_;
};

}  // namespace deepinfer
