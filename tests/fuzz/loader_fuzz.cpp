// libFuzzer target: the model folder's front door (src/loader, model configs). Byte 0 picks the
// input, the rest is its content:
//  - even: a .safetensors file (written to a per-process temporary file, as a checkpoint would be
//    on disk): SafetensorsFile::open returns a Status, never crashes; when it opens, every tensor's
//    byte range lies in the file (its first and last byte are read through the mapping, so ASan
//    sees any escape) and matches dtype x shape;
//  - odd: config.json text: parsed without exceptions, then V4Config::from_json and
//    V41Config::from_json each return a Status (an error for anything inconsistent), never a crash.
// Built by scripts/fuzz.sh (CMake option DI_FUZZ, clang).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "loader/safetensors.h"
#include "model/deepseek_v4/config.h"
#include "model/deepseek_v41/config.h"

using namespace deepinfer;

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "loader_fuzz: check failed: %s\n", what);
    std::abort();
  }
}

// Removed when the process exits.
struct TempFile {
  std::string path = "/tmp/loader_fuzz." + std::to_string(getpid()) + ".safetensors";
  ~TempFile() { std::remove(path.c_str()); }
};
const std::string& temp_path() {
  static const TempFile f;
  return f.path;
}

void fuzz_safetensors(const uint8_t* data, size_t size) {
  {
    std::ofstream f(temp_path(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto file = SafetensorsFile::open(temp_path());
  if (!file.is_ok()) {
    check(!file.status().message().empty(), "an error without a message");
    return;
  }
  volatile uint8_t sink = 0;
  for (const TensorInfo& t : (*file)->tensors()) {
    check(t.begin <= t.end && t.end <= size, "a tensor's range leaves the file");
    check((*file)->find(t.name) == &t, "find() does not return the tensor");
    const Tensor view = (*file)->tensor(t);
    const auto* p = static_cast<const uint8_t*>(view.data());
    if (t.end > t.begin) sink = sink + p[0] + p[t.end - t.begin - 1];
  }
  (void)sink;
}

void fuzz_config(const uint8_t* data, size_t size) {
  const nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return;
  auto v4 = v4::V4Config::from_json(j, "fuzz/config.json");
  if (!v4.is_ok()) check(!v4.status().message().empty(), "a V4 config error without a message");
  auto v41 = v41::V41Config::from_json(j, "fuzz/config.json");
  if (!v41.is_ok()) check(!v41.status().message().empty(), "a V4.1 config error without a message");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  if (data[0] % 2 == 0)
    fuzz_safetensors(data + 1, size - 1);
  else
    fuzz_config(data + 1, size - 1);
  return 0;
}
