// Hugging Face safetensors checkpoints, read by mapping the files: an 8-byte little-endian header
// length, a JSON header naming each tensor's dtype, shape and byte range, then the data. A model
// directory holds one `model.safetensors` or shards listed by `model.safetensors.index.json`.
// Every header is checked before a byte of data is trusted (ranges inside the file, sizes that
// match dtype x shape, no overlaps past the end); errors name the file and the tensor.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "messages/errc.hpp"

namespace kvactor {

enum class tensor_dtype : uint8_t { f32, f16, bf16 };

const char* to_string(tensor_dtype t);
size_t element_size(tensor_dtype t);

struct tensor_ref {
  std::string name;
  tensor_dtype dtype = tensor_dtype::f32;
  std::vector<int64_t> shape;
  const std::byte* data = nullptr; // inside the mapping
  size_t bytes = 0;
  std::string file; // the file it lives in (for messages)

  int64_t elements() const;
};

/// One mapped .safetensors file.
class safetensors_file {
public:
  static expected<std::shared_ptr<safetensors_file>> open(const std::string& path);
  ~safetensors_file();
  safetensors_file(const safetensors_file&) = delete;
  safetensors_file& operator=(const safetensors_file&) = delete;

  const std::map<std::string, tensor_ref>& tensors() const { return tensors_; }
  const std::string& path() const { return path_; }

private:
  safetensors_file() = default;
  status parse_header();

  std::string path_;
  void* map_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, tensor_ref> tensors_;
};

/// The tensors of a model directory, across its shards.
class checkpoint {
public:
  // Move-only: the index points into the tensors it owns.
  checkpoint(checkpoint&&) = default;
  checkpoint& operator=(checkpoint&&) = default;
  checkpoint(const checkpoint&) = delete;
  checkpoint& operator=(const checkpoint&) = delete;

  /// `dir` holds model.safetensors, or model.safetensors.index.json and the shards it names.
  static expected<checkpoint> open(const std::string& dir);

  /// A checkpoint held in memory, in float: each named tensor of the given shape, its values
  /// written by fill(name, values) (values arrive sized to the shape). Generated weights.
  static checkpoint
  in_memory(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes,
            const std::function<void(const std::string&, std::vector<float>&)>& fill);

  /// Tensors of the given shapes with no values (data null): for planning where generated
  /// weights go without holding them in host memory.
  static checkpoint
  shapes_only(const std::vector<std::pair<std::string, std::vector<int64_t>>>& shapes);

  /// nullptr when absent.
  const tensor_ref* find(const std::string& name) const;
  const std::map<std::string, const tensor_ref*>& tensors() const { return index_; }
  /// Bytes of every tensor.
  uint64_t total_bytes() const;

private:
  checkpoint() = default;
  std::vector<std::shared_ptr<safetensors_file>> files_;
  std::map<std::string, tensor_ref> owned_refs_;           // in_memory(): the tensors
  std::vector<std::shared_ptr<std::vector<float>>> owned_; // in_memory(): their values
  std::map<std::string, const tensor_ref*> index_;
};

/// Converts `n` elements of `t` starting at element `first` to float.
void to_float(const tensor_ref& t, int64_t first, int64_t n, float* out);

} // namespace kvactor
