// Pre-tokenization: Split (behavior Isolated) steps with PCRE2, then ByteLevel (optional prefix space, optional
// GPT-2 regex). As in `tokenizers`, every step runs on each piece the previous step produced, separately: a
// match never spans two pieces and a look-ahead such as `(?!\S)` sees the end of the piece as end of text.
// NOTE: `tokenizers` runs these patterns in Oniguruma, whose \s is Unicode White_Space; PCRE2's \s (with UCP)
// also matches U+180E MONGOLIAN VOWEL SEPARATOR. So \s and \S are rewritten to the White_Space set before
// compiling (\S inside a character class is left to PCRE2: no family pattern has one).
#define PCRE2_CODE_UNIT_WIDTH 8
#include "core/error.h"
#include "model/tokenizer/internal.h"

#include <pcre2.h>

namespace fp4moe::tok {

const char *const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

pcre2_code *as_code(void *p) {
    return static_cast<pcre2_code *>(p);
}

struct match_data_deleter {
    void operator()(pcre2_match_data *m) const { pcre2_match_data_free(m); }
};

} // namespace

namespace {

constexpr std::string_view kWhiteSpace =
    R"(\t-\r \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}\x{205f}\x{3000})";

// \s -> [White_Space] (its ranges alone inside a class), \S -> [^White_Space] outside a class.
std::string rewrite_white_space(std::string_view p) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        if (c == '\\' && i + 1 < p.size()) {
            const char e = p[++i];
            if (e == 's' && in_class) {
                out += kWhiteSpace;
            } else if (e == 's' || (e == 'S' && !in_class)) {
                out += e == 's' ? "[" : "[^";
                out += kWhiteSpace;
                out += ']';
            } else {
                out += c;
                out += e;
            }
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            out += c;
            if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
            if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i]; // a leading ']' is literal
            continue;
        }
        if (in_class && c == ']') in_class = false;
        out += c;
    }
    return out;
}

} // namespace

regex::regex(std::string_view pattern, bool literal, const std::string &label) {
    int err = 0;
    PCRE2_SIZE offset = 0;
    const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0u);
    const std::string text = literal ? std::string(pattern) : rewrite_white_space(pattern);
    pcre2_code *code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), options, &err, &offset, nullptr);
    if (!code) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(err, buf, sizeof buf);
        fail(status_code::corrupt, "{}: PCRE2 rejects the pattern at offset {}: {}", label, offset,
             reinterpret_cast<const char *>(buf));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // NOTE: failure (no JIT on this platform) leaves the interpreter
    code_ = code;
}

regex::regex(regex &&o) noexcept : code_(o.code_) {
    o.code_ = nullptr;
}

regex &regex::operator=(regex &&o) noexcept {
    std::swap(code_, o.code_);
    return *this;
}

regex::~regex() {
    if (code_) pcre2_code_free(as_code(code_));
}

void regex::find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>> &out) const {
    std::unique_ptr<pcre2_match_data, match_data_deleter> md(
        pcre2_match_data_create_from_pattern(as_code(code_), nullptr));
    if (!md) fail(status_code::internal, "pcre2_match_data_create_from_pattern failed");
    const auto *s = reinterpret_cast<PCRE2_SPTR>(subject.data());
    size_t start = 0;
    while (start < subject.size()) {
        // NOTE: the text was validated once up front; pieces are cut at code point boundaries.
        const int rc = pcre2_match(as_code(code_), s, subject.size(), start, PCRE2_NO_UTF_CHECK, md.get(), nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR buf[256];
            pcre2_get_error_message(rc, buf, sizeof buf);
            fail(status_code::internal, "pre-tokenizer regex match failed: {}", reinterpret_cast<const char *>(buf));
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md.get());
        size_t b = ov[0], e = ov[1];
        if (e == b) { // an empty match: step one code point on, as Rust/Oniguruma iteration does
            size_t next = b;
            if (next < subject.size()) utf8_next(subject, next);
            start = next;
            continue;
        }
        out.emplace_back(b, e);
        start = e;
    }
}

bool is_word_char(uint32_t cp) {
    if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
    static const regex word(R"(^[\p{L}\p{N}]$)", false, "word character class");
    std::string s;
    utf8_append(s, cp);
    std::vector<std::pair<size_t, size_t>> m;
    word.find_all(s, m);
    return !m.empty();
}

void pre_tokenizer::split(std::string_view text, std::vector<std::string_view> &pieces,
                          std::deque<std::string> &storage) const {
    std::vector<std::string_view> cur{text}, next;
    std::vector<std::pair<size_t, size_t>> m;
    auto isolate = [&](const regex &re) {
        next.clear();
        for (const std::string_view p : cur) {
            m.clear();
            re.find_all(p, m);
            size_t at = 0;
            for (const auto &[b, e] : m) {
                if (b > at) next.push_back(p.substr(at, b - at));
                next.push_back(p.substr(b, e - b));
                at = e;
            }
            if (at < p.size()) next.push_back(p.substr(at));
        }
        cur.swap(next);
    };
    if (text.empty()) return;
    for (const regex &re : splits) isolate(re);
    if (add_prefix_space) {
        for (std::string_view &p : cur) {
            if (!p.empty() && p.front() != ' ') {
                std::string &spaced = storage.emplace_back(1, ' ');
                spaced += p;
                p = storage.back();
            }
        }
    }
    if (byte_level_regex) isolate(*byte_level_regex);
    pieces.insert(pieces.end(), cur.begin(), cur.end());
}

} // namespace fp4moe::tok
