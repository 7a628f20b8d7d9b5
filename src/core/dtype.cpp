#include "core/dtype.h"

namespace deepinfer {

namespace {
struct DTypeInfo {
  DType type;
  std::string_view name;
  size_t size;
};
constexpr DTypeInfo kInfos[] = {
    {DType::kF32, "F32", 4},         {DType::kF16, "F16", 2},     {DType::kBF16, "BF16", 2},
    {DType::kF8E4M3, "F8_E4M3", 1},  {DType::kF8E8M0, "F8_E8M0", 1}, {DType::kI64, "I64", 8},
    {DType::kI32, "I32", 4},         {DType::kI8, "I8", 1},       {DType::kU8, "U8", 1},
    {DType::kBool, "BOOL", 1},
};
}  // namespace

size_t dtype_size(DType t) {
  for (const auto& i : kInfos) if (i.type == t) return i.size;
  return 0;
}

std::string_view dtype_name(DType t) {
  for (const auto& i : kInfos) if (i.type == t) return i.name;
  return "?";
}

std::optional<DType> dtype_from_name(std::string_view name) {
  for (const auto& i : kInfos) if (i.name == name) return i.type;
  return std::nullopt;
}

}  // namespace deepinfer
