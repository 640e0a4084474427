// .npy format: magic "\x93NUMPY", version 1.0, u16 header length, a Python dict literal header
// padded with spaces to a multiple of 64 bytes and ending in '\n' (NumPy NEP 1).
#include "core/npy.h"

#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"

namespace mlarun {

void WriteNpyF32(const std::string& path, const std::vector<int64_t>& shape, const float* data) {
  std::string dims;
  int64_t count = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) dims += ", ";
    dims += std::to_string(shape[i]);
    count *= shape[i];
  }
  if (shape.size() == 1) dims += ",";  // a 1-tuple is "(n,)"
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(count) * sizeof(float));
  WriteStringToFile(path, out);
}

NpyArray ReadNpyF32(const std::string& path) {
  const std::string bytes = ReadFileToString(path);
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) {
    throw Error(path + ": not a .npy file");
  }
  const uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t header_len = 0;
  size_t offset = 0;
  if (major == 1) {
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    offset = 10;
  } else {
    if (bytes.size() < 12) throw Error(path + ": truncated .npy header");
    header_len = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8) |
                 (static_cast<uint8_t>(bytes[10]) << 16) |
                 (static_cast<size_t>(static_cast<uint8_t>(bytes[11])) << 24);
    offset = 12;
  }
  if (offset + header_len > bytes.size()) throw Error(path + ": truncated .npy header");
  const std::string header = bytes.substr(offset, header_len);
  if (header.find("'<f4'") == std::string::npos) throw Error(path + ": dtype is not '<f4'");
  if (header.find("'fortran_order': False") == std::string::npos) {
    throw Error(path + ": fortran_order arrays are not supported");
  }
  const size_t open = header.find('(', header.find("'shape'"));
  const size_t close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) {
    throw Error(path + ": cannot parse shape");
  }
  NpyArray array;
  int64_t count = 1;
  std::string inner = header.substr(open + 1, close - open - 1);
  size_t pos = 0;
  while (pos < inner.size()) {
    size_t comma = inner.find(',', pos);
    if (comma == std::string::npos) comma = inner.size();
    std::string item = inner.substr(pos, comma - pos);
    if (item.find_first_not_of(' ') != std::string::npos) {
      array.shape.push_back(std::stoll(item));
      count *= array.shape.back();
    }
    pos = comma + 1;
  }
  const size_t data_offset = offset + header_len;
  if (bytes.size() - data_offset != static_cast<size_t>(count) * sizeof(float)) {
    throw Error(path + ": data size does not match shape");
  }
  array.data.resize(static_cast<size_t>(count));
  std::memcpy(array.data.data(), bytes.data() + data_offset, array.data.size() * sizeof(float));
  return array;
}

}  // namespace mlarun
