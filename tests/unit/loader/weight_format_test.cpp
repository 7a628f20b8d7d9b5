// Number formats (core/dtype.h) against reference decoders written from the format definitions
// (tests/util/quant.h), Weight::dequant_rows for every stored format, and make_weight's
// validation of dtype, shape and the companion scale tensor.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/dtype.h"
#include "loader/weight_format.h"
#include "tensor/weight.h"
#include "tests/util/checkpoint_writer.h"
#include "tests/util/quant.h"

namespace deepinfer {
namespace {

using namespace deepinfer::testing;

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// ---- e4m3

TEST(E4m3, EveryCodeMatchesTheDefinition) {
  for (int c = 0; c < 256; ++c) {
    const double ref = ref_e4m3(static_cast<uint8_t>(c));
    const float got = e4m3_to_f32(static_cast<uint8_t>(c));
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(got)) << "code " << c;
    } else {
      EXPECT_EQ(static_cast<double>(got), ref) << "code " << c;
      EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << "code " << c;
    }
  }
}

TEST(E4m3, SpecialValues) {
  EXPECT_EQ(e4m3_to_f32(0x00), 0.f);
  EXPECT_TRUE(std::signbit(e4m3_to_f32(0x80)));   // -0
  EXPECT_EQ(e4m3_to_f32(0x38), 1.f);              // exp 7, mantissa 0
  EXPECT_EQ(e4m3_to_f32(0x7e), 448.f);            // max finite
  EXPECT_EQ(e4m3_to_f32(0xfe), -448.f);
  EXPECT_EQ(e4m3_to_f32(0x78), 256.f);            // exp 15 is a normal binade in e4m3fn (no inf)
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xff)));
  // Subnormals: m * 2^-9.
  EXPECT_EQ(e4m3_to_f32(0x01), std::ldexp(1.f, -9));
  EXPECT_EQ(e4m3_to_f32(0x04), std::ldexp(1.f, -7));
  EXPECT_EQ(e4m3_to_f32(0x07), 7 * std::ldexp(1.f, -9));
  EXPECT_EQ(e4m3_to_f32(0x87), -7 * std::ldexp(1.f, -9));
  EXPECT_EQ(e4m3_to_f32(0x08), std::ldexp(1.f, -6));  // smallest normal
  // Monotonic over the positive codes.
  for (int c = 1; c < 0x7f; ++c) EXPECT_LT(e4m3_to_f32(c - 1), e4m3_to_f32(c));
}

TEST(E4m3, ReferenceEncoderRoundTrips) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) continue;
    EXPECT_EQ(ref_encode_e4m3(e4m3_to_f32(static_cast<uint8_t>(c))), c) << c;
  }
  EXPECT_EQ(ref_encode_e4m3(1000.0), 0x7e);   // saturates
  EXPECT_EQ(ref_encode_e4m3(-1000.0), 0xfe);
  EXPECT_EQ(ref_encode_e4m3(1.0625), 0x38);   // tie between 1 and 1.125 -> even code
}

// ---- e8m0

TEST(E8m0, PowersOfTwo) {
  EXPECT_EQ(e8m0_to_f32(127), 1.f);
  EXPECT_EQ(e8m0_to_f32(128), 2.f);
  EXPECT_EQ(e8m0_to_f32(120), 1.f / 128);
  EXPECT_EQ(e8m0_to_f32(254), std::ldexp(1.f, 127));
  EXPECT_EQ(e8m0_to_f32(0), std::ldexp(1.f, -127));  // a float subnormal, not zero
  EXPECT_GT(e8m0_to_f32(0), 0.f);
  EXPECT_TRUE(std::isnan(e8m0_to_f32(255)));
  for (int e = 0; e < 255; ++e) EXPECT_EQ(static_cast<double>(e8m0_to_f32(e)), ref_e8m0(e)) << e;
}

// ---- e2m1

TEST(E2m1, EveryCodeMatchesTheDefinition) {
  const float expect[16] = {0, .5f, 1, 1.5f, 2, 3, 4, 6, -0.f, -.5f, -1, -1.5f, -2, -3, -4, -6};
  for (int c = 0; c < 16; ++c) {
    EXPECT_TRUE(same_bits(e2m1_to_f32(c), expect[c])) << c;
    EXPECT_EQ(static_cast<double>(e2m1_to_f32(c)), ref_e2m1(c)) << c;
    EXPECT_EQ(e2m1_to_f32(c | 0xf0), e2m1_to_f32(c)) << "only the low 4 bits count";
  }
}

// ---- bf16 / f16

TEST(Bf16, DecodeEveryValue) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float r = ref_bf16(static_cast<uint16_t>(b)), g = bf16_to_f32(static_cast<uint16_t>(b));
    if (std::isnan(r)) EXPECT_TRUE(std::isnan(g));
    else EXPECT_TRUE(same_bits(r, g)) << b;
  }
  EXPECT_EQ(bf16_to_f32(0x3f80), 1.f);
  EXPECT_EQ(bf16_to_f32(0xc000), -2.f);
}

TEST(Bf16, EncodeRoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.f + std::ldexp(1.f, -8)), 0x3f80);      // tie -> even (down)
  EXPECT_EQ(f32_to_bf16(1.f + 3 * std::ldexp(1.f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(1.f + std::ldexp(1.f, -8) + std::ldexp(1.f, -20)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(f32_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  uint32_t snan_bits = 0x7f800001;  // a NaN whose payload sits in the dropped bits
  float snan;
  std::memcpy(&snan, &snan_bits, 4);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(snan))));
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 200000; ++i) {
    uint32_t u = bits(rng);
    float f;
    std::memcpy(&f, &u, 4);
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), ref_encode_bf16(f)) << std::hex << u;
  }
  for (uint32_t b = 0; b < 65536; ++b) {  // exact values round-trip
    const float f = ref_bf16(static_cast<uint16_t>(b));
    if (!std::isnan(f)) ASSERT_EQ(f32_to_bf16(f), b);
  }
}

TEST(F16, Decode) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(f16_to_f32(0x03ff), 1023 * std::ldexp(1.f, -24));
  EXPECT_EQ(f16_to_f32(0x0400), std::ldexp(1.f, -14));
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  EXPECT_TRUE(std::signbit(f16_to_f32(0x8000)));
}

TEST(DTypeNames, RoundTrip) {
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kF8E8M0, DType::kI64, DType::kI32,
                  DType::kI8, DType::kU8, DType::kBool}) {
    auto back = dtype_from_name(dtype_name(t));
    ASSERT_TRUE(back.has_value());
    EXPECT_EQ(*back, t);
  }
  EXPECT_EQ(dtype_size(DType::kF8E4M3), 1u);
  EXPECT_EQ(dtype_size(DType::kBF16), 2u);
  EXPECT_EQ(dtype_size(DType::kI64), 8u);
  EXPECT_FALSE(dtype_from_name("F8_E5M2").has_value());
  EXPECT_FALSE(dtype_from_name("").has_value());
}

// ---- Weight::dequant_rows on hand-built tensors.

template <class T>
Tensor owned(DType dt, Shape shape, const std::vector<T>& v) {
  auto buf = std::make_shared<std::vector<T>>(v);
  return Tensor(dt, std::move(shape), buf->data(), std::shared_ptr<const void>(buf, buf->data()));
}

std::vector<float> dequant_all(const Weight& w) {
  std::vector<float> out(static_cast<size_t>(w.rows * w.cols));
  w.dequant_rows(0, w.rows, out.data());
  return out;
}

TEST(DequantRows, Bf16AndF16) {
  Weight w;
  w.format = WeightFormat::kBF16;
  w.rows = 2, w.cols = 3;
  w.data = owned<uint16_t>(DType::kBF16, {2, 3}, {0x3f80, 0xc000, 0x0001, 0x7f80, 0x8000, 0x4049});
  auto o = dequant_all(w);
  for (int i = 0; i < 6; ++i) EXPECT_TRUE(same_bits(o[i], ref_bf16(static_cast<const uint16_t*>(w.data.data())[i])));
  std::vector<float> row1(3);
  w.dequant_rows(1, 1, row1.data());
  EXPECT_TRUE(std::isinf(row1[0]));
  w.format = WeightFormat::kF16;
  w.data = owned<uint16_t>(DType::kF16, {2, 3}, {0x3c00, 0xc000, 0x0001, 0x7bff, 0x8000, 0x3800});
  o = dequant_all(w);
  EXPECT_EQ(o[0], 1.f);
  EXPECT_EQ(o[3], 65504.f);
  EXPECT_EQ(o[5], 0.5f);
}

// FP8 with a [rows, cols] tile grid that does not divide evenly: rows 5 x cols 7, blocks 2 x 3.
void check_fp8(DType scale_dtype) {
  const int64_t R = 5, C = 7, br = 2, bc = 3, sr = 3, sc = 3;
  std::mt19937 rng(1);
  std::vector<uint8_t> q(R * C);
  for (auto& b : q) {
    b = static_cast<uint8_t>(rng());
    if ((b & 0x7f) == 0x7f) b = 0x11;  // no NaN codes
  }
  std::vector<float> s(sr * sc);
  for (int64_t i = 0; i < sr * sc; ++i) s[i] = std::ldexp(1.f, static_cast<int>(i) - 4) * (scale_dtype == DType::kF32 ? 1.3f : 1.f);
  Weight w;
  w.format = WeightFormat::kFp8Block;
  w.rows = R, w.cols = C, w.block_rows = br, w.block_cols = bc;
  w.data = owned<uint8_t>(DType::kF8E4M3, {R, C}, q);
  if (scale_dtype == DType::kF8E8M0) {
    std::vector<uint8_t> e(sr * sc);
    for (int64_t i = 0; i < sr * sc; ++i) e[i] = static_cast<uint8_t>(127 + i - 4);
    w.scale = owned<uint8_t>(DType::kF8E8M0, {sr, sc}, e);
  } else if (scale_dtype == DType::kBF16) {
    std::vector<uint16_t> e(sr * sc);
    for (int64_t i = 0; i < sr * sc; ++i) e[i] = ref_encode_bf16(s[i]);
    w.scale = owned<uint16_t>(DType::kBF16, {sr, sc}, e);
  } else {
    w.scale = owned<float>(DType::kF32, {sr, sc}, s);
  }
  const auto o = dequant_all(w);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float expect = static_cast<float>(ref_e4m3(q[r * C + c])) * s[(r / br) * sc + c / bc];
      EXPECT_TRUE(same_bits(o[r * C + c], expect)) << r << "," << c << ": " << o[r * C + c] << " vs " << expect;
    }
  // Rows one at a time equal the whole.
  for (int64_t r = 0; r < R; ++r) {
    std::vector<float> row(C);
    w.dequant_rows(r, 1, row.data());
    EXPECT_EQ(0, std::memcmp(row.data(), o.data() + r * C, C * 4));
  }
}

TEST(DequantRows, Fp8WithE8m0Scales) { check_fp8(DType::kF8E8M0); }
TEST(DequantRows, Fp8WithF32Scales) { check_fp8(DType::kF32); }
TEST(DequantRows, Fp8WithBf16Scales) { check_fp8(DType::kBF16); }

TEST(DequantRows, Mxfp4LowNibbleIsEvenColumn) {
  const int64_t R = 2, C = 64;
  std::vector<uint8_t> packed(R * C / 2), scale(R * C / 32);
  std::vector<uint8_t> codes(R * C);
  std::mt19937 rng(3);
  for (auto& c : codes) c = rng() & 15;
  codes[0] = 1, codes[1] = 2;  // first byte 0x21: col 0 = 0.5, col 1 = 1.0
  for (int64_t r = 0; r < R; ++r)
    for (int64_t j = 0; j < C / 2; ++j)
      packed[r * C / 2 + j] = static_cast<uint8_t>(codes[r * C + 2 * j] | (codes[r * C + 2 * j + 1] << 4));
  for (size_t i = 0; i < scale.size(); ++i) scale[i] = static_cast<uint8_t>(125 + i);
  EXPECT_EQ(packed[0], 0x21);
  Weight w;
  w.format = WeightFormat::kMxfp4;
  w.rows = R, w.cols = C, w.block_rows = 1, w.block_cols = 32;
  w.data = owned<uint8_t>(DType::kI8, {R, C / 2}, packed);
  w.scale = owned<uint8_t>(DType::kF8E8M0, {R, C / 32}, scale);
  const auto o = dequant_all(w);
  EXPECT_EQ(o[0], 0.5f * 0.25f);
  EXPECT_EQ(o[1], 1.0f * 0.25f);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float expect = static_cast<float>(ref_e2m1(codes[r * C + c]) * ref_e8m0(scale[r * 2 + c / 32]));
      EXPECT_TRUE(same_bits(o[r * C + c], expect)) << r << "," << c;
    }
}

// ---- make_weight / check_tensor validation (through a real file, so errors name it).

class MakeWeightTest : public ::testing::Test {
 protected:
  TempDir dir_{"make-weight"};
  std::string path_ = dir_ / "w.safetensors";
  std::shared_ptr<const SafetensorsFile> file_;

  void write(const TensorMap& m) {
    write_safetensors(path_, m);
    auto f = SafetensorsFile::open(path_);
    ASSERT_TRUE(f.is_ok()) << f.status().to_string();
    file_ = *f;
  }
  CheckpointTensor ct(const std::string& name) { return {file_.get(), file_->find(name)}; }
  Result<Weight> make(const std::string& name, const char* scale, WeightSpec spec) {
    CheckpointTensor d = ct(name);
    CheckpointTensor s = scale ? ct(scale) : CheckpointTensor{};
    return make_weight(name, d, scale ? &s : nullptr, spec);
  }
  void expect_error(const Result<Weight>& r, std::initializer_list<std::string> needles) {
    ASSERT_FALSE(r.is_ok());
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find(path_), std::string::npos) << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
};

RawTensor bytes_tensor(const char* dtype, std::vector<int64_t> shape, size_t elem) {
  size_t n = elem;
  for (auto d : shape) n *= static_cast<size_t>(d);
  return RawTensor{dtype, std::move(shape), std::vector<uint8_t>(n, 0x38)};
}

TEST_F(MakeWeightTest, AcceptsEveryFormatWithItsScale) {
  TensorMap m;
  m["f32.weight"] = bytes_tensor("F32", {4, 8}, 4);
  m["bf16.weight"] = bytes_tensor("BF16", {4, 8}, 2);
  m["f16.weight"] = bytes_tensor("F16", {4, 8}, 2);
  m["fp8.weight"] = bytes_tensor("F8_E4M3", {40, 70}, 1);
  m["fp8.scale"] = bytes_tensor("F8_E8M0", {3, 5}, 1);  // ceil(40/16), ceil(70/16)
  m["fp8f.scale"] = bytes_tensor("F32", {3, 5}, 4);
  m["fp4.weight"] = bytes_tensor("I8", {4, 32}, 1);
  m["fp4.scale"] = bytes_tensor("F8_E8M0", {4, 2}, 1);
  m["fp4u.weight"] = bytes_tensor("U8", {4, 32}, 1);
  write(m);
  auto w = make("f32.weight", nullptr, {4, 8});
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(w->format, WeightFormat::kF32);
  w = make("bf16.weight", nullptr, {4, 8});
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->format, WeightFormat::kBF16);
  w = make("f16.weight", nullptr, {4, 8});
  ASSERT_TRUE(w.is_ok());
  EXPECT_EQ(w->format, WeightFormat::kF16);
  w = make("fp8.weight", "fp8.scale", {40, 70, 16, 16});
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(w->format, WeightFormat::kFp8Block);
  EXPECT_EQ(w->block_rows, 16);
  w = make("fp8.weight", "fp8f.scale", {40, 70, 16, 16});
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  w = make("fp4.weight", "fp4.scale", {4, 64});
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
  EXPECT_EQ(w->format, WeightFormat::kMxfp4);
  EXPECT_EQ(w->nbytes(), 4u * 32 + 8);
  w = make("fp4u.weight", "fp4.scale", {4, 64});
  ASSERT_TRUE(w.is_ok()) << w.status().to_string();
}

TEST_F(MakeWeightTest, RejectsInconsistencies) {
  TensorMap m;
  m["f32.weight"] = bytes_tensor("F32", {4, 8}, 4);
  m["f32.scale"] = bytes_tensor("F32", {1, 1}, 4);
  m["fp8.weight"] = bytes_tensor("F8_E4M3", {40, 70}, 1);
  m["fp8.scale"] = bytes_tensor("F8_E8M0", {3, 5}, 1);
  m["fp8bad.scale"] = bytes_tensor("F8_E8M0", {1, 1}, 1);
  m["fp8i.scale"] = bytes_tensor("I32", {3, 5}, 4);
  m["fp4.weight"] = bytes_tensor("I8", {4, 32}, 1);
  m["fp4.scale"] = bytes_tensor("F8_E8M0", {4, 2}, 1);
  m["fp4f.scale"] = bytes_tensor("F32", {4, 2}, 4);
  m["fp4odd.weight"] = bytes_tensor("I8", {4, 20}, 1);
  m["fp4odd.scale"] = bytes_tensor("F8_E8M0", {4, 1}, 1);
  m["i64.weight"] = bytes_tensor("I64", {4, 8}, 8);
  write(m);
  expect_error(make("f32.weight", nullptr, {8, 4}), {"'f32.weight'", "shape [4, 8]", "expected [8, 4]"});
  expect_error(make("f32.weight", "f32.scale", {4, 8}), {"'f32.scale'", "unexpected scale"});
  expect_error(make("fp8.weight", nullptr, {40, 70, 16, 16}), {"'fp8.weight'", "without a '.scale'"});
  expect_error(make("fp8.weight", "fp8bad.scale", {40, 70, 16, 16}), {"'fp8bad.scale'", "expected [3, 5]"});
  expect_error(make("fp8.weight", "fp8.scale", {40, 70}), {"'fp8.scale'", "expected [1, 1]"});  // 128x128 blocks
  expect_error(make("fp8.weight", "fp8i.scale", {40, 70, 16, 16}), {"'fp8i.scale'", "dtype I32"});
  expect_error(make("fp8.weight", "fp8.scale", {70, 40, 16, 16}), {"'fp8.weight'", "shape"});
  expect_error(make("fp4.weight", nullptr, {4, 64}), {"'fp4.weight'", "without a '.scale'"});
  expect_error(make("fp4.weight", "fp4f.scale", {4, 64}), {"'fp4f.scale'", "dtype F32"});
  expect_error(make("fp4.weight", "fp4.scale", {4, 32}), {"'fp4.weight'", "expected [4, 16]"});
  expect_error(make("fp4odd.weight", "fp4odd.scale", {4, 40}), {"'fp4odd.weight'", "divisible by 32"});
  expect_error(make("i64.weight", nullptr, {4, 8}), {"'i64.weight'", "I64", "not a supported weight format"});
}

TEST_F(MakeWeightTest, CheckTensor) {
  TensorMap m;
  m["v"] = bytes_tensor("BF16", {6}, 2);
  write(m);
  EXPECT_TRUE(check_tensor("v", ct("v"), {6}, {DType::kF32, DType::kBF16}).is_ok());
  Status s = check_tensor("v", ct("v"), {6}, {DType::kF32});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(std::string(s.message()).find(path_ + ": tensor 'v': dtype BF16, expected F32"), std::string::npos)
      << s.message();
  s = check_tensor("v", ct("v"), {2, 3}, {DType::kBF16});
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(std::string(s.message()).find("shape [6], expected [2, 3]"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace deepinfer
