#include "loader/weight_format.h"

namespace deepinfer {

std::string tensor_where(const CheckpointTensor& t) {
  return t.file->path() + ": tensor '" + t.info->name + "'";
}

Status check_tensor(const std::string& name, const CheckpointTensor& t, const Shape& shape,
                    std::initializer_list<DType> allowed) {
  bool ok = false;
  std::string names;
  for (DType d : allowed) {
    ok |= t.info->dtype == d;
    names += (names.empty() ? "" : "/") + std::string(dtype_name(d));
  }
  if (!ok)
    return Status::invalid_argument(tensor_where(t) + ": dtype " + std::string(dtype_name(t.info->dtype)) +
                                    ", expected " + names);
  if (t.info->shape != shape)
    return Status::invalid_argument(tensor_where(t) + ": shape " + shape_to_string(t.info->shape) + ", expected " +
                                    shape_to_string(shape));
  return Status::ok();
}

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
}  // namespace

Result<Weight> make_weight(const std::string& name, const CheckpointTensor& data, const CheckpointTensor* scale,
                           const WeightSpec& spec) {
  Weight w;
  w.name = name;
  w.rows = spec.rows;
  w.cols = spec.cols;
  w.data = data.file->tensor(*data.info);
  const DType dt = data.info->dtype;
  auto need_no_scale = [&]() -> Status {
    if (scale) return Status::invalid_argument(tensor_where(*scale) + ": unexpected scale for a " +
                                               std::string(dtype_name(dt)) + " weight");
    return Status::ok();
  };
  switch (dt) {
    case DType::kF32:
    case DType::kBF16:
    case DType::kF16:
      DI_TRY(need_no_scale());
      DI_TRY(check_tensor(name, data, {spec.rows, spec.cols}, {dt}));
      w.format = dt == DType::kF32 ? WeightFormat::kF32 : dt == DType::kBF16 ? WeightFormat::kBF16 : WeightFormat::kF16;
      return w;
    case DType::kF8E4M3: {
      if (!scale) return Status::invalid_argument(tensor_where(data) + ": F8_E4M3 weight without a '.scale' tensor");
      DI_TRY(check_tensor(name, data, {spec.rows, spec.cols}, {DType::kF8E4M3}));
      DI_TRY(check_tensor(name, *scale,
                          {ceil_div(spec.rows, spec.fp8_block_rows), ceil_div(spec.cols, spec.fp8_block_cols)},
                          {DType::kF8E8M0, DType::kF32, DType::kBF16}));
      w.format = WeightFormat::kFp8Block;
      w.scale = scale->file->tensor(*scale->info);
      w.block_rows = spec.fp8_block_rows;
      w.block_cols = spec.fp8_block_cols;
      return w;
    }
    case DType::kI8:
    case DType::kU8: {
      if (!scale) return Status::invalid_argument(tensor_where(data) + ": packed FP4 weight without a '.scale' tensor");
      if (spec.cols % 32 != 0)
        return Status::invalid_argument(tensor_where(data) + ": MXFP4 needs in-features divisible by 32, got " +
                                        std::to_string(spec.cols));
      DI_TRY(check_tensor(name, data, {spec.rows, spec.cols / 2}, {dt}));
      DI_TRY(check_tensor(name, *scale, {spec.rows, spec.cols / 32}, {DType::kF8E8M0}));
      w.format = WeightFormat::kMxfp4;
      w.scale = scale->file->tensor(*scale->info);
      w.block_rows = 1;
      w.block_cols = 32;
      return w;
    }
    default:
      return Status::invalid_argument(tensor_where(data) + ": dtype " + std::string(dtype_name(dt)) +
                                      " is not a supported weight format");
  }
}

}  // namespace deepinfer
