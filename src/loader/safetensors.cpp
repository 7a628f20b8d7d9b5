#include "loader/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

namespace deepinfer {

namespace {
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit

Status header_error(const std::string& path, const std::string& what) {
  return Status::data_loss(path + ": " + what);
}

Result<TensorInfo> parse_entry(const std::string& path, const std::string& name, const nlohmann::json& v,
                               uint64_t data_size) {
  auto err = [&](const std::string& what) { return header_error(path, "tensor '" + name + "': " + what); };
  if (!v.is_object()) return err("header entry is not an object");
  if (!v.contains("dtype") || !v["dtype"].is_string()) return err("missing dtype");
  if (!v.contains("shape") || !v["shape"].is_array()) return err("missing shape");
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
    return err("missing or malformed data_offsets");
  TensorInfo info;
  info.name = name;
  auto dt = dtype_from_name(v["dtype"].get<std::string>());
  if (!dt) return err("unknown dtype '" + v["dtype"].get<std::string>() + "'");
  info.dtype = *dt;
  uint64_t numel = 1;
  for (const auto& d : v["shape"]) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
      return err("shape has a non-integer or negative dimension");
    const uint64_t dim = d.get<uint64_t>();
    if (dim > (1ull << 40) || (dim && numel > (1ull << 62) / dim)) return err("shape too large");
    numel *= dim;
    info.shape.push_back(static_cast<int64_t>(dim));
  }
  for (const auto& o : v["data_offsets"])
    if (!o.is_number_unsigned() && !(o.is_number_integer() && o.get<int64_t>() >= 0))
      return err("data_offsets are not non-negative integers");
  info.begin = v["data_offsets"][0].get<uint64_t>();
  info.end = v["data_offsets"][1].get<uint64_t>();
  if (info.begin > info.end) return err("data_offsets begin > end");
  if (info.end > data_size)
    return err("data_offsets [" + std::to_string(info.begin) + ", " + std::to_string(info.end) +
               ") past the end of the data (" + std::to_string(data_size) + " bytes; file truncated?)");
  if (numel > (1ull << 62) / dtype_size(info.dtype)) return err("shape too large");  // bytes must not wrap
  if (info.end - info.begin != numel * dtype_size(info.dtype))
    return err("byte size " + std::to_string(info.end - info.begin) + " does not match " +
               std::string(dtype_name(info.dtype)) + " " + shape_to_string(info.shape));
  return info;
}
}  // namespace

Result<std::shared_ptr<const SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::not_found(path + ": cannot open (" + std::strerror(errno) + ")");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::invalid_argument(path + ": not a regular file");
  }
  const auto file_size = static_cast<uint64_t>(st.st_size);
  if (file_size < 8) {
    ::close(fd);
    return header_error(path, "file is " + std::to_string(file_size) + " bytes, too short for a header");
  }
  void* map = mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Status::internal(path + ": mmap failed (" + std::strerror(errno) + ")");
  std::shared_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = file_size;
  const auto* bytes = static_cast<const uint8_t*>(map);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian, as the format says (x86/arm64 hosts)
  if (header_len > kMaxHeaderBytes || header_len > file_size - 8)
    return header_error(path, "header length " + std::to_string(header_len) + " exceeds the file (" +
                                  std::to_string(file_size) + " bytes)");
  file->data_ = bytes + 8 + header_len;
  const uint64_t data_size = file_size - 8 - header_len;
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const std::exception& e) {
    return header_error(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) return header_error(path, "header is not a JSON object");
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") continue;
    DI_ASSIGN_OR_RETURN(TensorInfo info, parse_entry(path, it.key(), it.value(), data_size));
    file->by_name_[info.name] = file->tensors_.size();
    file->tensors_.push_back(std::move(info));
  }
  // Empty tensors occupy no bytes and overlap nothing; every other one must start at or after
  // the furthest end seen so far (in begin order).
  std::vector<const TensorInfo*> sorted;
  for (const auto& t : file->tensors_)
    if (t.end > t.begin) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  const TensorInfo* furthest = nullptr;
  for (const TensorInfo* t : sorted) {
    if (furthest && t->begin < furthest->end)
      return header_error(path, "tensors '" + furthest->name + "' and '" + t->name + "' overlap");
    if (!furthest || t->end > furthest->end) furthest = t;
  }
  file->self_ = file;
  return std::shared_ptr<const SafetensorsFile>(file);
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(map_, map_size_);
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Tensor SafetensorsFile::tensor(const TensorInfo& info) const {
  return Tensor(info.dtype, info.shape, data_ + info.begin, self_.lock());
}

}  // namespace deepinfer
