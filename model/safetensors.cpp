#include "model/safetensors.hpp"

#include <cstring>
#include <fstream>
#include <limits>
#include <set>
#include <stdexcept>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kvactor/kernels/float_convert.h"

namespace kvactor {

namespace {

using nlohmann::json;

// A header is a few hundred bytes per tensor; 100 MB bounds a corrupt length field.
constexpr uint64_t max_header_bytes = 100u << 20;

error bad_file(const std::string& path, const std::string& why) {
  return make_error(errc::parse_error, fmt::format("{}: {}", path, why));
}

expected<tensor_dtype> parse_dtype(const std::string& s) {
  if (s == "F32") return tensor_dtype::f32;
  if (s == "F16") return tensor_dtype::f16;
  if (s == "BF16") return tensor_dtype::bf16;
  return make_error(errc::unsupported, fmt::format("dtype {} (kvactor reads F32, F16, BF16)", s));
}

// The tensor's shape, its element count and its byte range inside a data area of `data_bytes`.
expected<tensor_ref> parse_entry(const std::string& name, const json& e, size_t data_bytes) {
  auto fail = [&](const std::string& why) {
    return make_error(errc::parse_error, fmt::format("tensor {}: {}", name, why));
  };
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") || !e.contains("data_offsets"))
    return fail("needs dtype, shape and data_offsets");
  if (!e["dtype"].is_string()) return fail("dtype is not a string");
  auto dt = parse_dtype(e["dtype"].get<std::string>());
  if (!dt) return fail(dt.err().message);
  tensor_ref t;
  t.name = name;
  t.dtype = *dt;
  int64_t count = 1;
  if (!e["shape"].is_array()) return fail("shape is not a list");
  for (const auto& d : e["shape"]) {
    if (!d.is_number_unsigned()) return fail(fmt::format("shape entry {} is not a size", d.dump()));
    const auto v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
        || (v > 0 && count > std::numeric_limits<int64_t>::max() / static_cast<int64_t>(v)))
      return fail(fmt::format("shape {} is too large", e["shape"].dump()));
    count *= static_cast<int64_t>(v);
    t.shape.push_back(static_cast<int64_t>(v));
  }
  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned()
      || !off[1].is_number_unsigned())
    return fail(fmt::format("data_offsets {} is not [begin, end]", off.dump()));
  const auto begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
  if (begin > end || end > data_bytes)
    return fail(
        fmt::format("data_offsets [{}, {}] leave the {} data bytes", begin, end, data_bytes));
  const auto want = static_cast<uint64_t>(count) * element_size(t.dtype);
  if (end - begin != want)
    return fail(fmt::format("{} bytes for shape {} of {} ({} expected)", end - begin,
                            e["shape"].dump(), to_string(t.dtype), want));
  t.bytes = static_cast<size_t>(want);
  t.data = reinterpret_cast<const std::byte*>(static_cast<uintptr_t>(begin)); // rebased below
  return t;
}

} // namespace

const char* to_string(tensor_dtype t) {
  switch (t) {
  case tensor_dtype::f16: return "F16";
  case tensor_dtype::bf16: return "BF16";
  case tensor_dtype::f32: break;
  }
  return "F32";
}

size_t element_size(tensor_dtype t) {
  return t == tensor_dtype::f32 ? 4 : 2;
}

int64_t tensor_ref::elements() const {
  int64_t n = 1;
  for (auto d : shape)
    n *= d;
  return n;
}

expected<std::shared_ptr<safetensors_file>> safetensors_file::open(const std::string& path) {
  std::shared_ptr<safetensors_file> f(new safetensors_file());
  f->path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(errc::io_error, fmt::format("{}: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_size < 8) {
    ::close(fd);
    return bad_file(path, "shorter than the 8-byte header length");
  }
  f->size_ = static_cast<size_t>(st.st_size);
  f->map_ = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (f->map_ == MAP_FAILED) {
    f->map_ = nullptr;
    return make_error(errc::io_error, fmt::format("{}: mmap: {}", path, std::strerror(errno)));
  }
  if (auto ok = f->parse_header(); !ok) return ok.err();
  return f;
}

safetensors_file::~safetensors_file() {
  if (map_) ::munmap(map_, size_);
}

status safetensors_file::parse_header() {
  const auto* base = static_cast<const std::byte*>(map_);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i)
    header_len = (header_len << 8) | std::to_integer<uint64_t>(base[i]);
  if (header_len > max_header_bytes || header_len > size_ - 8)
    return bad_file(path_, fmt::format("header length {} does not fit the file of {} bytes",
                                       header_len, size_));
  const auto* text = reinterpret_cast<const char*>(base + 8);
  const json header = json::parse(text, text + header_len, nullptr, false);
  if (header.is_discarded() || !header.is_object())
    return bad_file(path_, "the header is not a JSON object");
  const auto* data = base + 8 + header_len;
  const size_t data_bytes = size_ - 8 - static_cast<size_t>(header_len);
  for (const auto& [name, e] : header.items()) {
    if (name == "__metadata__") continue;
    auto t = parse_entry(name, e, data_bytes);
    if (!t) return bad_file(path_, t.err().message);
    t->data = data + reinterpret_cast<uintptr_t>(t->data);
    t->file = path_;
    tensors_.emplace(name, std::move(*t));
  }
  return ok();
}

expected<checkpoint> checkpoint::open(const std::string& dir) {
  checkpoint c;
  const auto single = dir + "/model.safetensors";
  const auto index_path = dir + "/model.safetensors.index.json";
  std::vector<std::string> shards;
  if (std::ifstream in(index_path); in) {
    const json index = json::parse(in, nullptr, false);
    if (index.is_discarded() || !index.contains("weight_map") || !index["weight_map"].is_object())
      return bad_file(index_path, "no weight_map object");
    std::set<std::string> names;
    for (const auto& [tensor, file] : index["weight_map"].items()) {
      if (!file.is_string() || file.get<std::string>().find('/') != std::string::npos)
        return bad_file(index_path,
                        fmt::format("tensor {}: shard {} is not a file name", tensor, file.dump()));
      names.insert(file.get<std::string>());
    }
    shards.assign(names.begin(), names.end());
  } else if (std::ifstream one(single); one) {
    shards.push_back("model.safetensors");
  } else {
    return make_error(
        errc::io_error,
        fmt::format("{}: neither model.safetensors nor model.safetensors.index.json", dir));
  }
  for (const auto& s : shards) {
    auto f = safetensors_file::open(dir + "/" + s);
    if (!f) return f.err();
    for (const auto& [name, t] : (*f)->tensors()) {
      if (c.index_.count(name))
        return bad_file(
            dir, fmt::format("tensor {} is in {} and {}", name, c.index_[name]->file, t.file));
      c.index_.emplace(name, &t);
    }
    c.files_.push_back(std::move(*f));
  }
  return c;
}

checkpoint
checkpoint::in_memory(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes,
                      const std::function<void(const std::string&, std::vector<float>&)>& fill) {
  checkpoint c = shapes_only(shapes); // the map's nodes, which index_ points to, stay put
  for (auto& [name, t] : c.owned_refs_) {
    auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(t.elements()));
    fill(name, *values);
    t.data = reinterpret_cast<const std::byte*>(values->data());
    t.file = "(generated)";
    c.owned_.push_back(std::move(values));
  }
  return c;
}

checkpoint
checkpoint::shapes_only(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes) {
  checkpoint c;
  for (const auto& [name, shape] : shapes) {
    tensor_ref t;
    t.name = name;
    t.shape = shape;
    t.file = "(generated on the device)";
    t.bytes = static_cast<size_t>(t.elements()) * sizeof(float);
    auto [it, inserted] = c.owned_refs_.emplace(name, std::move(t));
    c.index_[name] = &it->second;
  }
  return c;
}

const tensor_ref* checkpoint::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : it->second;
}

uint64_t checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [name, t] : index_)
    n += t->bytes;
  return n;
}

void to_float(const tensor_ref& t, int64_t first, int64_t n, float* out) {
  if (t.data == nullptr)
    throw std::invalid_argument(fmt::format(
        "tensor {}: has no values ({}): a shapes-only checkpoint is for the GPU's generator",
        t.name, t.file));
  const size_t at = static_cast<size_t>(first) * element_size(t.dtype);
  switch (t.dtype) {
  case tensor_dtype::f32: std::memcpy(out, t.data + at, static_cast<size_t>(n) * 4); return;
  case tensor_dtype::bf16:
  case tensor_dtype::f16:
    for (int64_t i = 0; i < n; ++i) {
      uint16_t bits; // the mapping guarantees no alignment: copy out
      std::memcpy(&bits, t.data + at + static_cast<size_t>(i) * 2, 2);
      out[i] = t.dtype == tensor_dtype::bf16 ? kernels::bf16_to_float(bits)
                                             : kernels::f16_to_float(bits);
    }
    return;
  }
}

} // namespace kvactor
