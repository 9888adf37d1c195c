// libFuzzer target for the safetensors header parser.
//
// Input: a flag byte, then the data-buffer size: 2 bytes little-endian, or 8 when the flag's top bit is set
// (small sizes keep offsets near the buffer end, where off-by-one bugs live), then the header JSON. The raw
// input is also parsed as a whole file (length prefix + header + data) to exercise the prefix checks.
// Whatever is accepted must satisfy the invariants the reader relies on to never read out of bounds; a
// violation traps.
#include "core/error.h"
#include "model/safetensors_internal.h"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace {

void check_invariants(const fp4moe::safetensors_header &h, std::uint64_t data_size) {
    std::uint64_t prev_end = 0;
    for (const auto &t : h.tensors) {
        if (t.begin > t.end || t.end > data_size) __builtin_trap();
        std::uint64_t n = 1;
        for (auto d : t.shape) {
            if (d < 0) __builtin_trap();
            n *= static_cast<std::uint64_t>(d);
        }
        if (n * fp4moe::dtype_size(t.type) != t.nbytes()) __builtin_trap();
        if (t.begin == t.end) continue;
        if (t.begin < prev_end) __builtin_trap(); // sorted by offset and not overlapping
        prev_end = t.end;
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) {
    const int n = size > 0 && (data[0] & 0x80) ? 8 : 2;
    if (size >= static_cast<std::size_t>(1 + n)) {
        std::uint64_t data_size = 0;
        for (int i = n; i >= 1; --i) data_size = (data_size << 8) | data[i];
        std::string_view json(reinterpret_cast<const char *>(data) + 1 + n, size - 1 - n);
        auto r = fp4moe::parse_safetensors_header(json, data_size, "fuzz");
        if (r.ok())
            check_invariants(r.value(), data_size);
        else if (r.get_status().message().rfind("fuzz: ", 0) != 0)
            __builtin_trap(); // an exception other than fp4moe::error escaped the parser
    }
    try {
        auto layout = fp4moe::detail::parse_file_bytes({reinterpret_cast<const std::byte *>(data), size}, "file");
        if (8 + layout.header_size > size) __builtin_trap();
        check_invariants(layout.header, size - 8 - layout.header_size);
    } catch (const fp4moe::error &) {
    }
    return 0;
}
