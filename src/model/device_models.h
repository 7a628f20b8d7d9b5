// The device models load_model dispatches to for LoadOptions::device != "cpu". Which file
// defines load_cuda_model is chosen in src/model/CMakeLists.txt: model_device_cuda.cpp (the
// DeepSeek-V4 GPU model, model/deepseek_v4_gpu) when the CUDA backend is built, else
// model_device_none.cpp (a clear error). No #if outside src/backend.
#pragma once

#include <memory>
#include <string>

#include "core/result.h"
#include "model/numerics.h"

namespace deepinfer {

class Model;

/// A deepseek_v4 checkpoint on the CUDA device; an error when the build or machine has none.
Result<std::unique_ptr<Model>> load_cuda_model(const std::string& dir, const LoadOptions& opt);

}  // namespace deepinfer
