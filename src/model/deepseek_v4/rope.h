// Interleaved partial RoPE of V4 (pairs (2i, 2i+1) of the trailing rope dims form a complex
// number), with the plain table (sliding layers) and the YaRN-blended "compress" table
// (CSA/HCA layers), matching transformers' default / yarn inverse frequencies.
#pragma once

#include <vector>

#include "model/deepseek_v4/config.h"

namespace deepinfer::v4 {

class Rope {
 public:
  Rope(const RopeConfig& rc, int64_t rope_dim);
  /// Rotates the last rope_dim values of x (a row of `dim`) by position `pos`; `inverse` uses
  /// the conjugate (undoes the rotation).
  void apply(float* x, int64_t dim, int64_t pos, bool inverse = false) const;
  const std::vector<float>& inv_freq() const { return inv_freq_; }

 private:
  int64_t rope_dim_;
  std::vector<float> inv_freq_;  // [rope_dim / 2]
};

}  // namespace deepinfer::v4
