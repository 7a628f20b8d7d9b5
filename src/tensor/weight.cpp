#include "tensor/weight.h"

#include <array>

namespace deepinfer {

std::string_view weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::kF32: return "F32";
    case WeightFormat::kBF16: return "BF16";
    case WeightFormat::kF16: return "F16";
    case WeightFormat::kFp8Block: return "FP8 block-scaled";
    case WeightFormat::kMxfp4: return "MXFP4";
  }
  return "?";
}

namespace {
const std::array<float, 256>& e4m3_table() {
  static const std::array<float, 256> t = [] {
    std::array<float, 256> a{};
    for (int i = 0; i < 256; ++i) a[i] = e4m3_to_f32(static_cast<uint8_t>(i));
    return a;
  }();
  return t;
}

float scale_at(const Tensor& s, int64_t index) {
  switch (s.dtype()) {
    case DType::kF8E8M0: return e8m0_to_f32(static_cast<const uint8_t*>(s.data())[index]);
    case DType::kF32: return static_cast<const float*>(s.data())[index];
    case DType::kBF16: return bf16_to_f32(static_cast<const uint16_t*>(s.data())[index]);
    default: return NAN;  // rejected at load time
  }
}
}  // namespace

void Weight::dequant_rows(int64_t r0, int64_t n, float* out) const {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = r0 + i;
    float* o = out + i * cols;
    switch (format) {
      case WeightFormat::kF32: {
        const float* src = static_cast<const float*>(data.data()) + r * cols;
        for (int64_t c = 0; c < cols; ++c) o[c] = src[c];
        break;
      }
      case WeightFormat::kBF16: {
        const uint16_t* src = static_cast<const uint16_t*>(data.data()) + r * cols;
        for (int64_t c = 0; c < cols; ++c) o[c] = bf16_to_f32(src[c]);
        break;
      }
      case WeightFormat::kF16: {
        const uint16_t* src = static_cast<const uint16_t*>(data.data()) + r * cols;
        for (int64_t c = 0; c < cols; ++c) o[c] = f16_to_f32(src[c]);
        break;
      }
      case WeightFormat::kFp8Block: {
        const auto& lut = e4m3_table();
        const uint8_t* src = static_cast<const uint8_t*>(data.data()) + r * cols;
        const int64_t scale_cols = scale.dim(1);
        const int64_t srow = (r / block_rows) * scale_cols;
        for (int64_t c0 = 0; c0 < cols; c0 += block_cols) {
          const float s = scale_at(scale, srow + c0 / block_cols);
          const int64_t c1 = std::min(cols, c0 + block_cols);
          for (int64_t c = c0; c < c1; ++c) o[c] = lut[src[c]] * s;
        }
        break;
      }
      case WeightFormat::kMxfp4: {
        const uint8_t* src = static_cast<const uint8_t*>(data.data()) + r * (cols / 2);
        const int64_t scale_cols = cols / 32;
        for (int64_t g = 0; g < scale_cols; ++g) {
          const float s = scale_at(scale, r * scale_cols + g);
          for (int64_t j = 0; j < 16; ++j) {
            const uint8_t b = src[g * 16 + j];
            o[g * 32 + 2 * j] = e2m1_to_f32(b & 0xf) * s;
            o[g * 32 + 2 * j + 1] = e2m1_to_f32(b >> 4) * s;
          }
        }
        break;
      }
    }
  }
}

}  // namespace deepinfer
