// fp4moe public API: safetensors files and Hugging Face checkpoints (reader and writer).
//
// Format: 8-byte little-endian header length N, N bytes of UTF-8 JSON
//   {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...}
// then the data buffer; offsets are relative to the buffer start. Files are mmapped read-only; a hostile
// file is rejected with an error naming the file and the tensor, never read out of bounds.
//
// Reader decisions (where the format leaves room):
//  - Gaps between tensors and bytes after the last one are accepted (the reference Rust implementation
//    rejects them; Python's writer never produces them); overlapping tensors are rejected.
//  - A JSON object that repeats a key (a tensor name, a metadata key, "dtype", ...) is rejected, as is
//    JSON nested deeper than 16 levels; unknown fields inside a tensor entry are ignored. An empty tensor
//    name is read as is (the format allows it) though `write_safetensors` refuses to write one.
//  - A 0-byte file (or any file under 8 bytes) is `corrupt`; a file with header `{}` and no tensors is fine.
//  - Errors: `not_found` (missing file), `io_error` (open/stat/mmap/read refused, not a regular file),
//    `corrupt` (everything about the contents).
#pragma once

#include "fp4moe/dtype.h"
#include "fp4moe/status.h"

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fp4moe {

/// One tensor's header entry.
struct tensor_info {
    std::string name;
    dtype type = dtype::u8;
    std::vector<std::int64_t> shape; ///< empty for a 0-dim (scalar) tensor
    std::uint64_t begin = 0;         ///< offset of the first byte, relative to the data buffer
    std::uint64_t end = 0;           ///< one past the last byte

    std::uint64_t nbytes() const { return end - begin; }
    std::int64_t numel() const; ///< product of shape (1 for a scalar)
};

/// A parsed header: tensors in file order, and the optional `__metadata__` map. File order is data order:
/// by `begin`, then `end` (so a zero-size tensor comes before a tensor that starts where it does), then name.
/// For files written by Python's `safetensors` or by `write_safetensors` it is also the header's order.
struct safetensors_header {
    std::vector<tensor_info> tensors;
    std::map<std::string, std::string> metadata;
};

/// Largest header accepted (the format's reference implementation uses the same 100 MB limit).
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100u * 1000u * 1000u;

/// Parses and validates a header's JSON against a data buffer of `data_size` bytes: valid UTF-8 JSON
/// object, known dtypes, non-negative shapes, shape x dtype == byte size, offsets inside the buffer and not
/// overlapping. `label` (usually the file path) starts every error message. Pure; the fuzz target.
result<safetensors_header> parse_safetensors_header(std::string_view json, std::uint64_t data_size,
                                                    std::string_view label);

/// One open .safetensors file (mmapped, read-only). Move-only; the mapping lives as long as the object, and
/// moving keeps every `tensor_info` pointer and data span valid. Thread-safe for concurrent reads.
/// NOTE: the file must not be truncated while mapped (reading a page past the new end raises SIGBUS).
class safetensors_file {
public:
    static result<safetensors_file> open(const std::string &path);

    safetensors_file(safetensors_file &&) noexcept;
    safetensors_file &operator=(safetensors_file &&) noexcept;
    ~safetensors_file();

    const std::string &path() const;
    const std::vector<tensor_info> &tensors() const;
    const std::map<std::string, std::string> &metadata() const;
    /// The entry named `name`, or null.
    const tensor_info *find(std::string_view name) const;
    /// The tensor's bytes inside the mapping (valid while this object lives). `t` must come from this file
    /// (aborts if its offsets lie outside this file's data buffer). Empty for a zero-size tensor.
    std::span<const std::byte> data(const tensor_info &t) const;
    /// Total file size in bytes.
    std::uint64_t file_size() const;

private:
    struct impl;
    explicit safetensors_file(std::unique_ptr<impl> p);
    std::unique_ptr<impl> p_;
};

/// A checkpoint: one .safetensors file, or a directory with `model.safetensors` or shards listed in
/// `model.safetensors.index.json` (its `weight_map` must name files that exist and tensors that are in them).
/// When the index exists it wins over `model.safetensors`. Shard names must be plain file names beside the
/// index (no '/', not "." or ".."). Every tensor of a listed shard is included, listed in `weight_map` or
/// not; a tensor held by two files is an error. Files are ordered by shard name. Move-only.
class checkpoint {
public:
    /// `path` is a .safetensors file or a directory. Errors name the index, shard and tensor involved.
    static result<checkpoint> open(const std::string &path);

    const std::string &path() const { return path_; }
    const std::vector<safetensors_file> &files() const { return files_; }

    /// A tensor found in one of the files.
    struct entry {
        const safetensors_file *file = nullptr;
        const tensor_info *info = nullptr;
        std::span<const std::byte> data() const { return file->data(*info); }
    };
    /// Every tensor, sorted by name.
    const std::vector<entry> &tensors() const { return tensors_; }
    /// Looks a tensor up by name; `info` is null when absent.
    entry find(std::string_view name) const;

private:
    std::string path_;
    std::vector<safetensors_file> files_;
    std::vector<entry> tensors_;
};

/// A tensor to write: the bytes are copied as they are (little-endian, row-major).
struct tensor_to_write {
    std::string name;
    dtype type = dtype::u8;
    std::vector<std::int64_t> shape;
    std::span<const std::byte> data; ///< must hold numel * dtype_size bytes
};

/// Writes a .safetensors file (header padded with spaces to a multiple of 8 bytes, tensors in the given
/// order, data contiguous, `__metadata__` first and only when non-empty). Written to `path + ".tmp"`,
/// fsynced, then renamed over `path`, so a crash never leaves a half file; the .tmp is removed on failure.
/// Errors (`invalid_argument`): duplicate or empty names, the name "__metadata__", names or metadata that
/// are not valid UTF-8, negative dimensions, data size != shape x dtype, a header over the size limit;
/// (`io_error`): create/write/fsync/rename failures, naming the path.
status write_safetensors(const std::string &path, std::span<const tensor_to_write> tensors,
                         const std::map<std::string, std::string> &metadata = {});

} // namespace fp4moe
