// Safetensors reading (validated against the file size) and writing.
#include "model/safetensors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace mlarun {

namespace {
using Json = nlohmann::json;
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the format's own limit is 100 MB
constexpr uint64_t kDataAlignment = 64;             // written files: cache-line aligned data
}  // namespace

int64_t TensorInfo::NumElements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string TensorInfo::ShapeString() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafetensorsArchive SafetensorsArchive::OpenFile(const std::string& path) {
  SafetensorsArchive archive;
  archive.AddFile(path, FileLoad::kMmap);
  return archive;
}

SafetensorsArchive SafetensorsArchive::Open(const std::string& model_dir, FileLoad load) {
  namespace fs = std::filesystem;
  SafetensorsArchive archive;
  const std::string single = model_dir + "/model.safetensors";
  const std::string index = model_dir + "/model.safetensors.index.json";
  if (fs::exists(index)) {
    Json json;
    try {
      json = Json::parse(ReadFileToString(index));
    } catch (const Json::parse_error& e) {
      throw Error(index + ": invalid JSON: " + e.what());
    }
    if (!json.contains("weight_map") || !json.at("weight_map").is_object()) {
      throw Error(index + ": field 'weight_map' is missing or not an object");
    }
    std::map<std::string, std::vector<std::string>> names_by_file;
    for (const auto& [name, file] : json.at("weight_map").items()) {
      if (!file.is_string()) {
        std::string message = index;
        message.append(": weight_map['").append(name).append("'] is not a string");
        throw Error(message);
      }
      names_by_file[file.get<std::string>()].push_back(name);
    }
    for (const auto& [file, names] : names_by_file) {
      if (file.find('/') != std::string::npos) {
        std::string message = index;
        message.append(": shard name '").append(file).append("' has a '/'");
        throw Error(message);
      }
      std::string shard = model_dir;
      shard.append("/").append(file);
      archive.AddFile(shard, load);
      for (const std::string& name : names) {
        const TensorInfo* t = archive.Find(name);
        if (t == nullptr || t->file != shard) {
          std::string message = shard;
          message.append(": tensor '").append(name).append("' listed in ");
          message.append(index).append(" is missing");
          throw Error(message);
        }
      }
    }
  } else if (fs::exists(single)) {
    archive.AddFile(single, load);
  } else {
    throw Error(model_dir + ": no model.safetensors or model.safetensors.index.json");
  }
  return archive;
}

void SafetensorsArchive::AddFile(const std::string& path, FileLoad load) {
  auto file = std::make_unique<MappedFile>(path, load);
  const size_t size = file->size();
  if (size < 8)
    throw Error(path + ": truncated safetensors file (" + std::to_string(size) + " bytes)");
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | file->data()[i];
  if (header_size > kMaxHeaderBytes || header_size > size - 8) {
    throw Error(path + ": safetensors header size " + std::to_string(header_size) +
                " exceeds the file size " + std::to_string(size));
  }
  const char* header_begin = reinterpret_cast<const char*>(file->data() + 8);
  Json header;
  try {
    header = Json::parse(header_begin, header_begin + header_size);
  } catch (const Json::parse_error& e) {
    throw Error(path + ": safetensors header is not valid JSON: " + e.what());
  }
  if (!header.is_object()) throw Error(path + ": safetensors header is not a JSON object");
  const uint8_t* data_begin = file->data() + 8 + header_size;
  const size_t data_size = size - 8 - header_size;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    std::string where = path;
    where.append(": tensor '").append(name).append("'");
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      throw Error(where + ": header entry needs dtype, shape and data_offsets");
    }
    TensorInfo info;
    info.name = name;
    info.file = path;
    if (!entry.at("dtype").is_string() ||
        !ParseDTypeName(entry.at("dtype").get<std::string>(), &info.dtype)) {
      throw Error(where + ": unsupported dtype " + entry.at("dtype").dump());
    }
    const Json& shape = entry.at("shape");
    const Json& offsets = entry.at("data_offsets");
    if (!shape.is_array() || !offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      throw Error(where + ": malformed shape or data_offsets");
    }
    uint64_t n_elements = 1;
    for (const Json& d : shape) {
      if (!d.is_number_unsigned())
        throw Error(where + ": shape entries must be non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim != 0 && n_elements > std::numeric_limits<uint64_t>::max() / dim) {
        throw Error(where + ": shape overflows");
      }
      n_elements *= dim;
      info.shape.push_back(static_cast<int64_t>(dim));
    }
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_size) {
      throw Error(where + ": data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                  "] lie outside the " + std::to_string(data_size) +
                  " data bytes (truncated file?)");
    }
    if (end - begin != n_elements * DTypeSize(info.dtype)) {
      throw Error(where + ": " + std::to_string(end - begin) + " bytes do not match shape " +
                  info.ShapeString() + " of " + std::string(DTypeName(info.dtype)));
    }
    info.data = data_begin + begin;
    info.n_bytes = end - begin;
    if (tensors_.count(name) != 0) throw Error(where + ": defined twice");
    tensors_.emplace(name, std::move(info));
  }
  files_.push_back(std::move(file));
}

const TensorInfo* SafetensorsArchive::Find(const std::string& name) const {
  const auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

void SafetensorsArchive::ReleasePages(const void* data, size_t bytes) const {
  for (const auto& f : files_) f->ReleasePages(static_cast<const uint8_t*>(data), bytes);
}

size_t SafetensorsArchive::MappedBytes() const {
  size_t total = 0;
  for (const auto& f : files_) total += f->size();
  return total;
}

void WriteSafetensorsStreaming(
    const std::string& path, const std::vector<TensorDecl>& decls,
    const std::map<std::string, std::string>& metadata,
    const std::function<void(const TensorDecl&, std::vector<uint8_t>&)>& fill) {
  // Tensors whose size is a multiple of a cache line come first, in the order declared, the rest
  // after with larger element types first: with the data section cache-line aligned, every large
  // tensor then starts on a cache line (vector loads never straddle two lines) and every tensor on
  // its element size. (Declaration order lets a caller write related tensors one after another.)
  auto n_bytes = [](const TensorDecl& d) {
    uint64_t bytes = DTypeSize(d.dtype);
    for (int64_t dim : d.shape) bytes *= static_cast<uint64_t>(dim);
    return bytes;
  };
  std::vector<const TensorDecl*> order;
  order.reserve(decls.size());
  for (const TensorDecl& d : decls) order.push_back(&d);
  std::stable_sort(order.begin(), order.end(), [&](const TensorDecl* a, const TensorDecl* b) {
    const bool a_lines = n_bytes(*a) % kDataAlignment == 0;
    const bool b_lines = n_bytes(*b) % kDataAlignment == 0;
    if (a_lines != b_lines) return a_lines;
    return !a_lines && DTypeSize(a->dtype) > DTypeSize(b->dtype);
  });
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const TensorDecl* d : order) {
    const uint64_t bytes = n_bytes(*d);
    header[d->name] = {{"dtype", DTypeName(d->dtype)},
                       {"shape", d->shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // Pad the header with spaces (allowed by the format) so the data section starts on a cache line.
  text.append((kDataAlignment - (8 + text.size()) % kDataAlignment) % kDataAlignment, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw Error(path + ": cannot create");
  uint8_t size_bytes[8];
  for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<uint8_t>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(size_bytes), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  std::vector<uint8_t> bytes;
  for (const TensorDecl* d : order) {
    fill(*d, bytes);
    const auto& entry = header.at(d->name).at("data_offsets");
    if (bytes.size() != entry[1].get<uint64_t>() - entry[0].get<uint64_t>()) {
      throw Error(path + ": tensor '" + d->name + "' filled with the wrong number of bytes");
    }
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
  }
  if (!out) throw Error(path + ": write failed");
}

void WriteSafetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<TensorDecl> decls;
  std::map<std::string, const TensorToWrite*> by_name;
  for (const TensorToWrite& t : tensors) {
    decls.push_back({t.name, t.dtype, t.shape});
    by_name[t.name] = &t;
  }
  WriteSafetensorsStreaming(
      path, decls, metadata,
      [&](const TensorDecl& d, std::vector<uint8_t>& bytes) { bytes = by_name.at(d.name)->data; });
}

}  // namespace mlarun
