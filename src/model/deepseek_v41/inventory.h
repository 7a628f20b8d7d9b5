// The tensor inventory a V4.1 text checkpoint must hold, derived from V41Config alone (names as
// DeepSeek publishes them, logical shapes), and a name check of a model.safetensors.index.json
// against it: what `deepinfer inspect` reports on a folder without weights.
#pragma once

#include <string>
#include <vector>

#include "model/deepseek_v41/config.h"
#include "tensor/tensor.h"

namespace deepinfer::v41 {

enum class TensorGroup : uint8_t { kBackbone, kEngramTable, kEngramOther };

struct ExpectedTensor {
  std::string name;
  Shape shape;        // logical (unpacked) shape
  bool linear;        // may carry a `.scale` companion (FP8 / MXFP4)
  TensorGroup group;
};

std::vector<ExpectedTensor> expected_tensors(const V41Config& c);

struct IndexCheck {
  int64_t matched = 0, scales = 0, dspark = 0, not_checked = 0;
  std::vector<std::string> missing, unexpected;
  uint64_t backbone_params = 0, engram_table_params = 0, engram_other_params = 0;
};

/// Checks the names of an index's weight_map against the inventory. `mtp.*` (DSpark stages) are
/// counted, not checked; names of the vision tower (containing "vision", "visual", "aligner" or
/// "image") are counted as not checked; everything else must be expected.
IndexCheck check_index_names(const V41Config& c, const std::vector<std::string>& names);

}  // namespace deepinfer::v41
