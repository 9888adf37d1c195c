// The 128x4 swizzled block-scale layout of block-scaled GEMMs (nvfp4.md section 3): tiles of 128 rows x 4
// scale columns, 512 bytes each, K-tiles inner; inside a tile row r sits at (r % 32) * 16 + (r / 32) * 4.
#include "core/error.h"
#include "fp4moe/nvfp4.h"

#include <algorithm>

namespace fp4moe::nvfp4 {

namespace {

constexpr std::int64_t round_up(std::int64_t v, std::int64_t m) {
    return (v + m - 1) / m * m;
}

void check_args(std::int64_t rows, std::int64_t scale_cols, std::size_t linear_size, std::size_t swizzled_size,
                const char *what) {
    if (rows < 0 || scale_cols < 0)
        fail(status_code::invalid_argument, "nvfp4: {}: negative shape [{}, {}]", what, rows, scale_cols);
    const auto linear = static_cast<std::size_t>(rows * scale_cols);
    if (linear_size < linear)
        fail(status_code::invalid_argument, "nvfp4: {}: linear buffer holds {} bytes, needs {} x {} = {}", what,
             linear_size, rows, scale_cols, linear);
    const std::size_t swizzled = swizzled_scales_size(rows, scale_cols);
    if (swizzled_size < swizzled)
        fail(status_code::invalid_argument, "nvfp4: {}: swizzled buffer holds {} bytes, needs {}", what, swizzled_size,
             swizzled);
}

} // namespace

std::size_t swizzled_scales_size(std::int64_t rows, std::int64_t scale_cols) {
    return static_cast<std::size_t>(round_up(rows, 128) * round_up(scale_cols, 4));
}

std::size_t swizzled_scale_offset(std::int64_t r, std::int64_t kb, std::int64_t scale_cols) {
    const std::int64_t kb_pad = round_up(scale_cols, 4);
    return static_cast<std::size_t>((r / 128) * (kb_pad * 128) + (kb / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 +
                                    (kb % 4));
}

status swizzle_scales_128x4(std::span<const std::uint8_t> linear, std::int64_t rows, std::int64_t scale_cols,
                            std::span<std::uint8_t> out) {
    return catch_status([&] {
        check_args(rows, scale_cols, linear.size(), out.size(), "swizzle_scales_128x4");
        std::fill_n(out.begin(), swizzled_scales_size(rows, scale_cols), std::uint8_t{0});
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t kb = 0; kb < scale_cols; ++kb)
                out[swizzled_scale_offset(r, kb, scale_cols)] = linear[static_cast<std::size_t>(r * scale_cols + kb)];
    });
}

status unswizzle_scales_128x4(std::span<const std::uint8_t> swizzled, std::int64_t rows, std::int64_t scale_cols,
                              std::span<std::uint8_t> out) {
    return catch_status([&] {
        check_args(rows, scale_cols, out.size(), swizzled.size(), "unswizzle_scales_128x4");
        for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t kb = 0; kb < scale_cols; ++kb)
                out[static_cast<std::size_t>(r * scale_cols + kb)] = swizzled[swizzled_scale_offset(r, kb, scale_cols)];
    });
}

} // namespace fp4moe::nvfp4
