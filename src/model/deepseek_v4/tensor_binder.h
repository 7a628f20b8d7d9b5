// TensorTable and Binder: bind a checkpoint's tensors to model slots by canonical name, with
// dtype/shape validation (loader/weight_format.h); whatever is left unclaimed is an error naming
// the file and the tensor. Shared by the V4 and V4.1 weight loaders.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "loader/checkpoint.h"
#include "loader/weight_format.h"
#include "tensor/weight.h"

namespace deepinfer::v4::binder {

inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
inline bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// Claims tensors by canonical name; whatever is left unclaimed at the end is an error.
class TensorTable {
 public:
  static Result<TensorTable> build(const Checkpoint& ck, std::string (*canonical)(std::string_view)) {
    TensorTable t;
    for (const auto& ct : ck.tensors()) {
      std::string canon = canonical(ct.info->name);
      auto [it, inserted] = t.map_.emplace(canon, Entry{ct, false});
      if (!inserted)
        return Status::invalid_argument(tensor_where(ct) + ": duplicates '" + it->second.t.info->name + "' in " +
                                        it->second.t.file->path());
    }
    return t;
  }
  const CheckpointTensor* find(const std::string& name) {
    auto it = map_.find(name);
    if (it == map_.end()) return nullptr;
    it->second.claimed = true;
    return &it->second.t;
  }
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  bool has_prefix(const std::string& prefix) const {
    for (const auto& [k, v] : map_) if (starts_with(k, prefix)) return true;
    return false;
  }
  /// Claims every tensor under `prefix` without binding it; returns how many.
  int64_t claim_prefix(const std::string& prefix) {
    int64_t n = 0;
    for (auto& [k, v] : map_)
      if (starts_with(k, prefix)) v.claimed = true, ++n;
    return n;
  }
  /// How many tensors have been claimed so far.
  int64_t claimed_count() const {
    int64_t n = 0;
    for (const auto& [k, v] : map_) n += v.claimed;
    return n;
  }
  Status check_all_claimed(const std::string& dir) const {
    for (const auto& [k, v] : map_)
      if (!v.claimed) return Status::invalid_argument(tensor_where(v.t) + ": unexpected tensor (not part of this "
                                                                          "architecture as config.json describes it)");
    return Status::ok();
  }

 private:
  struct Entry {
    CheckpointTensor t;
    bool claimed;
  };
  std::unordered_map<std::string, Entry> map_;
};

class Binder {
 public:
  Binder(TensorTable& table, int64_t fp8_block_rows, int64_t fp8_block_cols, const std::string& dir)
      : t_(table), br_(fp8_block_rows), bc_(fp8_block_cols), dir_(dir) {}

  /// Context appended to "missing tensor" errors (e.g. what config.json says about the layer).
  void set_context(std::string ctx) { ctx_ = std::move(ctx); }

  Result<const CheckpointTensor*> require(const std::string& name) {
    const CheckpointTensor* ct = t_.find(name);
    if (!ct) return Status::invalid_argument(dir_ + ": missing tensor '" + name + "'" + ctx_);
    return ct;
  }
  Result<Weight> linear(const std::string& prefix, int64_t rows, int64_t cols) {
    return linear_blocks(prefix, rows, cols, br_, bc_);
  }
  /// A linear weight whose FP8 scale blocks are not the checkpoint's default (e.g. per-row tables).
  Result<Weight> linear_blocks(const std::string& prefix, int64_t rows, int64_t cols, int64_t br, int64_t bc) {
    DI_ASSIGN_OR_RETURN(const CheckpointTensor* w, require(prefix + ".weight"));
    const CheckpointTensor* s = t_.find(prefix + ".scale");
    WeightSpec spec{rows, cols, br, bc};
    return make_weight(prefix + ".weight", *w, s, spec);
  }
  Result<std::vector<float>> vec(const std::string& name, const Shape& shape) {
    DI_ASSIGN_OR_RETURN(const CheckpointTensor* ct, require(name));
    DI_TRY(check_tensor(name, *ct, shape, {DType::kF32, DType::kBF16, DType::kF16}));
    Tensor tv = ct->file->tensor(*ct->info);
    std::vector<float> out(static_cast<size_t>(tv.numel()));
    for (size_t i = 0; i < out.size(); ++i) {
      switch (tv.dtype()) {
        case DType::kF32: out[i] = static_cast<const float*>(tv.data())[i]; break;
        case DType::kBF16: out[i] = bf16_to_f32(static_cast<const uint16_t*>(tv.data())[i]); break;
        default: out[i] = f16_to_f32(static_cast<const uint16_t*>(tv.data())[i]); break;
      }
    }
    return out;
  }
  /// An fp32 matrix used as a Weight (mHC projections).
  Result<Weight> matrix(const std::string& name, int64_t rows, int64_t cols) {
    DI_ASSIGN_OR_RETURN(const CheckpointTensor* ct, require(name));
    WeightSpec spec{rows, cols, br_, bc_};
    return make_weight(name, *ct, nullptr, spec);
  }
  Result<std::vector<int32_t>> table(const std::string& name, int64_t rows, int64_t cols, int64_t max_value) {
    DI_ASSIGN_OR_RETURN(const CheckpointTensor* ct, require(name));
    DI_TRY(check_tensor(name, *ct, {rows, cols}, {DType::kI64, DType::kI32}));
    Tensor tv = ct->file->tensor(*ct->info);
    std::vector<int32_t> out(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < out.size(); ++i) {
      const int64_t v = tv.dtype() == DType::kI64 ? static_cast<const int64_t*>(tv.data())[i]
                                                  : static_cast<const int32_t*>(tv.data())[i];
      if (v < 0 || v >= max_value)
        return Status::invalid_argument(tensor_where(*ct) + ": entry " + std::to_string(i) + " = " +
                                        std::to_string(v) + " is not an expert id in [0, " +
                                        std::to_string(max_value) + ")");
      out[i] = static_cast<int32_t>(v);
    }
    return out;
  }

 private:
  TensorTable& t_;
  int64_t br_, bc_;
  std::string dir_;
  std::string ctx_;
};

}  // namespace deepinfer::v4::binder

namespace deepinfer::v4 {
using binder::Binder;
using binder::TensorTable;
}  // namespace deepinfer::v4
