// UTF-8 helpers: validation, code point iteration, lossy repair (maximal subparts, as Rust's
// String::from_utf8_lossy), and the incomplete-tail test the stream decoder holds bytes back with.
#include "model/tokenizer/internal.h"

namespace fp4moe::tok {

namespace {

// Length of a complete valid sequence starting at s[i], or 0 when invalid; `consumed` is the length of the
// maximal subpart examined (>= 1) so an invalid one can be replaced by one U+FFFD.
size_t sequence_at(std::string_view s, size_t i, size_t &consumed) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    consumed = 1;
    if (b0 < 0x80) return 1;
    size_t need = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        need = 2;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F; // NOTE: no surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        need = 3;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    } else {
        return 0;
    }
    for (size_t k = 1; k <= need; ++k) {
        if (i + k >= s.size()) return 0;
        const auto b = static_cast<uint8_t>(s[i + k]);
        if (b < lo || b > hi) return 0;
        lo = 0x80;
        hi = 0xBF;
        consumed = k + 1;
    }
    return need + 1;
}

} // namespace

bool utf8_valid(std::string_view s) {
    size_t consumed = 0;
    for (size_t i = 0; i < s.size();) {
        const size_t n = sequence_at(s, i, consumed);
        if (n == 0) return false;
        i += n;
    }
    return true;
}

uint32_t utf8_next(std::string_view s, size_t &i) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) {
        i += 1;
        return b0;
    }
    const size_t n = b0 >= 0xF0 ? 4 : b0 >= 0xE0 ? 3 : 2;
    uint32_t cp = b0 & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    i += n;
    return cp;
}

void utf8_append(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (cp >> 18));
        out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
}

std::string utf8_lossy(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    size_t consumed = 0;
    for (size_t i = 0; i < bytes.size();) {
        const size_t n = sequence_at(bytes, i, consumed);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            i += consumed;
        } else {
            out.append(bytes.substr(i, n));
            i += n;
        }
    }
    return out;
}

size_t utf8_incomplete_tail(std::string_view bytes) {
    const size_t n = bytes.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const size_t i = n - back;
        const auto b = static_cast<uint8_t>(bytes[i]);
        if ((b & 0xC0) == 0x80) continue; // continuation byte: look further back for the lead
        size_t consumed = 0;
        // A proper prefix: invalid only because it ends early, i.e. every byte present was accepted.
        if (b >= 0xC2 && b <= 0xF4 && sequence_at(bytes, i, consumed) == 0 && consumed == back) return back;
        return 0;
    }
    return 0;
}

bool is_white_space(uint32_t cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

} // namespace fp4moe::tok
