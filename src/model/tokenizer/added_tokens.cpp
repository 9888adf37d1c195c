// Added tokens are found in the text before pre-tokenization, as `tokenizers`' AddedVocabulary does: scan left
// to right, at each position take the longest token that starts there; `single_word` discards a match touching a
// word character; `lstrip`/`rstrip` widen a match over neighbouring whitespace (which then belongs to the token).
#include "model/tokenizer/internal.h"

#include <algorithm>

namespace fp4moe::tok {

void added_token_matcher::build(const std::vector<added_token> &tokens) {
    tokens_ = tokens;
    for (auto &b : by_first_byte_) b.clear();
    for (uint32_t i = 0; i < tokens_.size(); ++i) {
        if (tokens_[i].content.empty()) continue;
        by_first_byte_[static_cast<uint8_t>(tokens_[i].content[0])].push_back(i);
    }
    for (auto &b : by_first_byte_) {
        std::stable_sort(b.begin(), b.end(),
                         [&](uint32_t x, uint32_t y) { return tokens_[x].content.size() > tokens_[y].content.size(); });
    }
}

namespace {

// Code point ending right before byte `at` (valid UTF-8).
uint32_t cp_before(std::string_view s, size_t at) {
    size_t i = at - 1;
    while (i > 0 && (static_cast<uint8_t>(s[i]) & 0xC0) == 0x80) --i;
    return utf8_next(s, i);
}

} // namespace

void added_token_matcher::split(std::string_view text, bool normalized_pass, bool allow_special,
                                std::vector<segment> &out) const {
    size_t done = 0; // end of the last emitted segment
    size_t i = 0;
    while (i < text.size()) {
        const added_token *hit = nullptr;
        for (const uint32_t k : by_first_byte_[static_cast<uint8_t>(text[i])]) {
            const added_token &t = tokens_[k];
            if (t.normalized != normalized_pass) continue;
            if (text.compare(i, t.content.size(), t.content) == 0) {
                hit = &t;
                break;
            }
        }
        if (!hit) {
            ++i;
            continue;
        }
        size_t start = i, stop = i + hit->content.size();
        i = stop; // a discarded match still consumes its text, as the Aho-Corasick iteration does
        if (hit->special && !allow_special) continue;
        if (hit->single_word) {
            size_t j = stop;
            const bool word_before = start > 0 && is_word_char(cp_before(text, start));
            const bool word_after = stop < text.size() && is_word_char(utf8_next(text, j));
            if (word_before || word_after) continue;
        }
        if (hit->lstrip) {
            while (start > done && is_white_space(cp_before(text, start))) {
                const uint32_t cp = cp_before(text, start);
                start -= cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            }
        }
        if (hit->rstrip) {
            while (stop < text.size()) {
                size_t j = stop;
                if (!is_white_space(utf8_next(text, j))) break;
                stop = j;
            }
            i = stop;
        }
        if (start > done) out.push_back({done, start, -1});
        out.push_back({start, stop, hit->id});
        done = stop;
    }
    if (done < text.size()) out.push_back({done, text.size(), -1});
}

} // namespace fp4moe::tok
