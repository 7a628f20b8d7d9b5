// SafetensorsFile::open on well-formed and malformed files: every malformation is a Status
// (never a crash) whose message names the file and, where one is involved, the tensor.
#include <gtest/gtest.h>

#include <filesystem>

#include "loader/safetensors.h"
#include "tests/util/checkpoint_writer.h"

namespace deepinfer {
namespace {

using testing::safetensors_blob;
using testing::TempDir;
using testing::write_file;

std::string floats(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  TempDir dir_{"safetensors"};
  std::string path_ = dir_ / "t.safetensors";

  // Opens `bytes` written to path_; expects an error whose message holds every `needles`.
  void expect_error(const std::string& bytes, std::initializer_list<std::string> needles) {
    write_file(path_, bytes);
    auto f = SafetensorsFile::open(path_);
    ASSERT_FALSE(f.is_ok()) << "opened a malformed file";
    const std::string msg(f.status().message());
    EXPECT_NE(msg.find(path_), std::string::npos) << "message does not name the file: " << msg;
    for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  }
};

TEST_F(SafetensorsTest, WellFormedFileRoundTrips) {
  testing::TensorMap m;
  m["a"] = testing::f32_tensor({2, 3}, {1, 2, 3, 4, 5, 6});
  m["b"] = testing::i64_tensor({2}, {7, -8});
  m["empty"] = testing::f32_tensor({0, 4}, {});
  testing::write_safetensors(path_, m);
  auto f = SafetensorsFile::open(path_);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  ASSERT_EQ((*f)->tensors().size(), 3u);  // __metadata__ is not a tensor
  const TensorInfo* a = (*f)->find("a");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, (Shape{2, 3}));
  Tensor t = (*f)->tensor(*a);
  EXPECT_EQ(t.span<float>()[5], 6.f);
  EXPECT_EQ((*f)->tensor(*(*f)->find("b")).span<int64_t>()[1], -8);
  EXPECT_EQ((*f)->find("__metadata__"), nullptr);
  EXPECT_EQ((*f)->find("missing"), nullptr);
  // The mapping outlives the file handle through the tensor view.
  std::weak_ptr<const SafetensorsFile> weak = *f;
  f = Status::internal("drop");
  EXPECT_FALSE(weak.expired());
  EXPECT_EQ(t.span<float>()[0], 1.f);
}

TEST_F(SafetensorsTest, FileShorterThan8Bytes) {
  expect_error("", {"too short"});
  expect_error(std::string(5, '\0'), {"too short"});
  expect_error(std::string(7, '\x10'), {"too short"});
}

TEST_F(SafetensorsTest, MissingFileIsNotFound) {
  auto f = SafetensorsFile::open(dir_ / "absent.safetensors");
  ASSERT_FALSE(f.is_ok());
  EXPECT_NE(std::string(f.status().message()).find("absent.safetensors"), std::string::npos);
  auto d = SafetensorsFile::open(dir_.path);  // a directory
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(std::string(d.status().message()).find(dir_.path), std::string::npos);
}

TEST_F(SafetensorsTest, HeaderLengthPastTheEnd) {
  const std::string h = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  expect_error(safetensors_blob(h, floats({1}), 1000), {"header length 1000", "exceeds"});
  expect_error(safetensors_blob(h, floats({1}), h.size() + 5), {"exceeds"});
  expect_error(safetensors_blob(h, floats({1}), int64_t{1} << 62), {"header length"});
  expect_error(safetensors_blob("", "", -1 + (int64_t{1} << 40)), {"header length"});
  // Length as unsigned 2^64-1.
  std::string b = safetensors_blob(h, floats({1}));
  std::memset(b.data(), 0xff, 8);
  expect_error(b, {"header length"});
}

TEST_F(SafetensorsTest, HeaderNotJson) {
  expect_error(safetensors_blob("{not json", ""), {"not valid JSON"});
  expect_error(safetensors_blob(R"({"a":{"dtype":"F32")", ""), {"not valid JSON"});
  expect_error(safetensors_blob("", "abcd"), {"not valid JSON"});  // empty header
  expect_error(safetensors_blob(std::string("\xff\xfe\x00\x01", 4), ""), {"JSON"});
  expect_error(safetensors_blob("[1, 2, 3]", ""), {"not a JSON object"});
  expect_error(safetensors_blob(R"("tensor")", ""), {"not a JSON object"});
}

TEST_F(SafetensorsTest, MalformedEntries) {
  expect_error(safetensors_blob(R"({"w": 3})", ""), {"'w'", "not an object"});
  expect_error(safetensors_blob(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", floats({1})), {"'w'", "dtype"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", floats({1})), {"'w'", "shape"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[1]}})", floats({1})), {"'w'", "data_offsets"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", floats({1})),
               {"'w'", "data_offsets"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", floats({1})),
               {"'w'", "negative"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", floats({1})),
               {"'w'", "dimension"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,"4"]}})", floats({1})),
               {"'w'", "data_offsets"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", floats({1})),
               {"'w'", "data_offsets"});
  expect_error(safetensors_blob(R"({"w":{"dtype":7,"shape":[1],"data_offsets":[0,4]}})", floats({1})),
               {"'w'", "dtype"});
}

TEST_F(SafetensorsTest, UnknownDtype) {
  expect_error(safetensors_blob(R"({"w":{"dtype":"F4","shape":[2],"data_offsets":[0,1]}})", "x"),
               {"'w'", "unknown dtype 'F4'"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"f32","shape":[1],"data_offsets":[0,4]}})", floats({1})),
               {"'w'", "unknown dtype"});
}

TEST_F(SafetensorsTest, OffsetsOutOfRange) {
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", floats({1, 2})),
               {"'w'", "past the end"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[9,9]}})", floats({1, 2})),
               {"'w'", "past the end"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", floats({1, 2, 3})),
               {"'w'", "begin > end"});
  expect_error(
      safetensors_blob(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})", floats({1})),
      {"'w'"});
}

TEST_F(SafetensorsTest, ByteSizeNotMatchingDtypeTimesShape) {
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})",
                                std::string(24, '\0')),
               {"'w'", "byte size 20", "F32 [2, 3]"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,16]}})",
                                std::string(16, '\0')),
               {"'w'", "byte size 16"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"I64","shape":[],"data_offsets":[0,4]}})", floats({1})),
               {"'w'", "byte size 4"});
}

TEST_F(SafetensorsTest, ShapeWhoseByteSizeOverflows) {
  // 2^31 * 2^30 elements of 8 bytes = 2^64 bytes: must not wrap around to 0 and pass.
  expect_error(safetensors_blob(R"({"w":{"dtype":"I64","shape":[2147483648,1073741824],"data_offsets":[0,0]}})", ""),
               {"'w'"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", ""),
               {"'w'"});
  expect_error(safetensors_blob(R"({"w":{"dtype":"F32","shape":[1099511627777],"data_offsets":[0,0]}})", ""),
               {"'w'"});
}

TEST_F(SafetensorsTest, OverlappingTensors) {
  const std::string data(64, '\0');
  expect_error(safetensors_blob(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", data),
               {"'a'", "'b'", "overlap"});
  expect_error(safetensors_blob(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                R"("b":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", data),
               {"overlap"});
  // b lies inside a.
  expect_error(safetensors_blob(R"({"a":{"dtype":"F32","shape":[16],"data_offsets":[0,64]},)"
                                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[32,36]}})", data),
               {"'a'", "'b'", "overlap"});
  // An empty tensor between two overlapping ones does not hide the overlap.
  expect_error(safetensors_blob(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                                R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", data),
               {"'a'", "'b'", "overlap"});
}

TEST_F(SafetensorsTest, AdjacentAndEmptyTensorsAreFine) {
  write_file(path_, safetensors_blob(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                     R"("e":{"dtype":"F32","shape":[0],"data_offsets":[16,16]},)"
                                     R"("z":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                                     R"("b":{"dtype":"F32","shape":[4],"data_offsets":[16,32]}})",
                                     std::string(32, '\0')));
  auto f = SafetensorsFile::open(path_);
  ASSERT_TRUE(f.is_ok()) << f.status().to_string();
  EXPECT_EQ((*f)->tensors().size(), 4u);
}

TEST_F(SafetensorsTest, TruncatedFileNamesTheTensor) {
  testing::TensorMap m;
  m["first"] = testing::f32_tensor({4}, {1, 2, 3, 4});
  m["second"] = testing::f32_tensor({4}, {5, 6, 7, 8});
  testing::write_safetensors(path_, m);
  std::string full = testing::read_file(path_);
  expect_error(full.substr(0, full.size() - 1), {"'second'", "past the end", "truncated"});
  // Every proper prefix of a valid file fails cleanly.
  for (size_t n = 0; n < full.size(); ++n) {
    write_file(path_, full.substr(0, n));
    auto f = SafetensorsFile::open(path_);
    EXPECT_FALSE(f.is_ok()) << "prefix of " << n << " bytes opened";
    if (!f.is_ok()) EXPECT_NE(std::string(f.status().message()).find(path_), std::string::npos);
  }
}

TEST_F(SafetensorsTest, CorruptedHeaderBytesNeverCrash) {
  testing::TensorMap m;
  m["w"] = testing::f32_tensor({2, 2}, {1, 2, 3, 4});
  m["x"] = testing::i64_tensor({1}, {3});
  testing::write_safetensors(path_, m);
  const std::string full = testing::read_file(path_);
  uint64_t hlen;
  std::memcpy(&hlen, full.data(), 8);
  int errors = 0;
  for (uint64_t i = 8; i < 8 + hlen; ++i) {
    for (char c : {'0', '9', ']', '"', '-', 'x'}) {
      std::string b = full;
      if (b[i] == c) continue;
      b[i] = c;
      write_file(path_, b);
      auto f = SafetensorsFile::open(path_);
      if (f.is_ok()) {
        for (const auto& t : (*f)->tensors()) {  // whatever opened must be readable in full
          Tensor v = (*f)->tensor(t);
          volatile uint8_t sink = 0;
          const auto* p = static_cast<const uint8_t*>(v.data());
          for (size_t k = 0; k < v.nbytes(); ++k) sink = sink ^ p[k];
          (void)sink;
        }
      } else {
        ++errors;
        EXPECT_NE(std::string(f.status().message()).find(path_), std::string::npos);
      }
    }
  }
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace deepinfer
