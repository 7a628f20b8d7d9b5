// Turns checkpoint tensors into a Weight of known logical shape, validating dtype, shape and the
// companion scale tensor. Errors name the file and the tensor and say what was expected.
#pragma once

#include "core/result.h"
#include "loader/checkpoint.h"
#include "tensor/weight.h"

namespace deepinfer {

struct WeightSpec {
  int64_t rows = 0;  // logical out features
  int64_t cols = 0;  // logical in features
  int64_t fp8_block_rows = 128;
  int64_t fp8_block_cols = 128;
};

/// `data` is the `.weight` tensor, `scale` the companion `.scale` (nullptr when absent).
Result<Weight> make_weight(const std::string& name, const CheckpointTensor& data, const CheckpointTensor* scale,
                           const WeightSpec& spec);

/// Checks a plain (non-linear) tensor: dtype in `allowed`, exact shape.
Status check_tensor(const std::string& name, const CheckpointTensor& t, const Shape& shape,
                    std::initializer_list<DType> allowed);

/// "path: tensor 'name'" for error messages.
std::string tensor_where(const CheckpointTensor& t);

}  // namespace deepinfer
