// Weight: a linear layer's matrix [rows=out, cols=in] in its stored format. Kernels read it as
// stored (no up-front conversion): dequant_rows() expands rows to fp32 on the fly.
//   kF32 / kBF16 / kF16: plain row-major.
//   kFp8Block: F8_E4M3 [rows, cols] with one scale per block_rows x block_cols tile
//              (E8M0 power-of-two, F32 or BF16), shape [ceil(rows/br), ceil(cols/bc)].
//   kMxfp4:    packed e2m1, bytes [rows, cols/2] (low nibble = even column), E8M0 scale per
//              32 consecutive columns, shape [rows, cols/32].
#pragma once

#include <string>

#include "tensor/tensor.h"

namespace deepinfer {

enum class WeightFormat : uint8_t { kF32, kBF16, kF16, kFp8Block, kMxfp4 };

std::string_view weight_format_name(WeightFormat f);

struct Weight {
  std::string name;
  WeightFormat format = WeightFormat::kF32;
  int64_t rows = 0;
  int64_t cols = 0;
  Tensor data;
  Tensor scale;  // undefined for plain formats
  int64_t block_rows = 0;
  int64_t block_cols = 0;

  bool defined() const { return rows > 0; }
  /// Bytes of the stored data and scales.
  size_t nbytes() const { return data.nbytes() + (scale.data() ? scale.nbytes() : 0); }
  /// Writes rows [r0, r0+n) as fp32 into out[n, cols].
  void dequant_rows(int64_t r0, int64_t n, float* out) const;
};

}  // namespace deepinfer
