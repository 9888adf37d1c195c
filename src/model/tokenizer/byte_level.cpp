// GPT-2's byte <-> unicode table (bytes_to_unicode): every byte becomes a printable character so that vocab
// entries are JSON text. Bytes 33..126, 161..172 and 174..255 stand for themselves; the other 68 take
// U+0100.. in byte order (space -> U+0120 'Ġ', newline -> U+010A 'Ċ').
#include "model/tokenizer/internal.h"

namespace fp4moe::tok {

namespace {

struct tables {
    std::array<uint32_t, 256> to_unicode{};
    std::array<int16_t, 324> to_byte{}; // code points < 0x144 only; -1 when not in the table

    tables() {
        to_byte.fill(-1);
        uint32_t next = 256;
        for (uint32_t b = 0; b < 256; ++b) {
            const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
            to_unicode[b] = printable ? b : next++;
            to_byte[to_unicode[b]] = static_cast<int16_t>(b);
        }
    }
};

const tables &get_tables() {
    static const tables t;
    return t;
}

} // namespace

const std::array<uint32_t, 256> &byte_to_unicode() {
    return get_tables().to_unicode;
}

std::string byte_level_encode(std::string_view bytes) {
    const auto &t = get_tables();
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) utf8_append(out, t.to_unicode[static_cast<uint8_t>(c)]);
    return out;
}

std::string byte_level_decode(std::string_view token) {
    const auto &t = get_tables();
    std::string out;
    out.reserve(token.size());
    for (size_t i = 0; i < token.size();) {
        const uint32_t cp = utf8_next(token, i);
        if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::string(token);
        out += static_cast<char>(t.to_byte[cp]);
    }
    return out;
}

} // namespace fp4moe::tok
