// Tokenizer internals shared by the files of src/model/tokenizer/ (one idea per file; see each declaration).
// Functions here may throw fp4moe::error; include/fp4moe/tokenizer.h is the non-throwing boundary.
#pragma once

#include "fp4moe/tokenizer.h"

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fp4moe::tok {

// ---- utf8.cpp -------------------------------------------------------------------------------------------
bool utf8_valid(std::string_view s);
/// Decodes the code point at `i` of valid UTF-8 and advances `i` past it.
uint32_t utf8_next(std::string_view s, size_t &i);
void utf8_append(std::string &out, uint32_t cp);
/// Copies `bytes`, replacing each maximal invalid subpart with U+FFFD (Rust's String::from_utf8_lossy).
std::string utf8_lossy(std::string_view bytes);
/// Length (0..3) of a trailing proper prefix of a valid sequence, i.e. bytes that may still complete.
size_t utf8_incomplete_tail(std::string_view bytes);
/// Unicode White_Space (Rust's char::is_whitespace).
bool is_white_space(uint32_t cp);

// ---- byte_level.cpp: GPT-2's bytes_to_unicode ---------------------------------------------------------------
/// The code point each byte maps to: printable Latin-1 bytes map to themselves, the 68 others to U+0100...
const std::array<uint32_t, 256> &byte_to_unicode();
/// Each byte of `bytes` as its mapped character, UTF-8 encoded ("a b" -> "aĠb").
std::string byte_level_encode(std::string_view bytes);
/// A token string back to bytes as `tokenizers`' ByteLevel decoder does: when every character is in the table,
/// the bytes they stand for; otherwise the token's own UTF-8 (added tokens such as "<｜User｜>").
std::string byte_level_decode(std::string_view token);

// ---- nfc.cpp ------------------------------------------------------------------------------------------------
/// Unicode NFC of valid UTF-8 (tables: nfc_tables.inc, Unicode 14). Returns the input unchanged when quick-check
/// finds nothing to do.
std::string nfc(std::string_view s);

// ---- pretokenize.cpp ----------------------------------------------------------------------------------------
/// A compiled PCRE2 pattern (UTF | UCP, JIT when available). Matching is thread-safe (match data per call).
class regex {
public:
    /// Throws `corrupt` naming `label` when PCRE2 rejects the pattern. `literal`: match the text as is.
    regex(std::string_view pattern, bool literal, const std::string &label);
    regex(regex &&) noexcept;
    regex &operator=(regex &&) noexcept;
    ~regex();
    /// Appends the byte ranges [begin, end) of successive non-overlapping matches in `subject`.
    void find_all(std::string_view subject, std::vector<std::pair<size_t, size_t>> &out) const;

private:
    void *code_ = nullptr; // pcre2_code_8
};

/// The pre_tokenizer: Split steps (Isolated) then ByteLevel. Pieces are cut per piece, as `tokenizers` does.
struct pre_tokenizer {
    std::vector<regex> splits;
    bool add_prefix_space = false;
    std::unique_ptr<regex> byte_level_regex; ///< ByteLevel use_regex: the GPT-2 pattern

    /// Cuts `text` into pieces; pieces point into `text` or into `storage` (prefix spaces).
    void split(std::string_view text, std::vector<std::string_view> &pieces, std::deque<std::string> &storage) const;
};

/// A word character for added tokens' `single_word`: \p{L}, \p{N} or '_' (Rust's is_alphanumeric, nearly).
bool is_word_char(uint32_t cp);

/// The GPT-2 regex ByteLevel applies when `use_regex` is true.
extern const char *const kGpt2Pattern;

// ---- added_tokens.cpp ---------------------------------------------------------------------------------------
struct added_token {
    int32_t id = -1;
    std::string content;
    bool special = false;
    bool lstrip = false;
    bool rstrip = false;
    bool single_word = false;
    bool normalized = false;
};

/// A piece of text: an added token (`id` >= 0) or plain text (`id` == -1) covering [begin, end).
struct segment {
    size_t begin = 0;
    size_t end = 0;
    int32_t id = -1;
};

/// Finds added tokens in text: leftmost match, longest first; lstrip/rstrip widen the match over whitespace.
class added_token_matcher {
public:
    void build(const std::vector<added_token> &tokens);
    /// Splits `text` on the tokens whose `normalized` flag equals `normalized_pass` (special ones only when
    /// `allow_special`). Appends segments covering all of `text` in order; whitespace absorbed by lstrip/rstrip
    /// belongs to the token's segment.
    void split(std::string_view text, bool normalized_pass, bool allow_special, std::vector<segment> &out) const;

private:
    std::vector<added_token> tokens_;
    std::array<std::vector<uint32_t>, 256> by_first_byte_; ///< indices into tokens_, longest content first
};

// ---- bpe.cpp ------------------------------------------------------------------------------------------------
/// model.type "BPE" over the byte-level alphabet.
class bpe_model {
public:
    std::unordered_map<std::string, int32_t> vocab; ///< token string (byte-level form) -> id
    std::vector<std::string> id_to_token;           ///< "" for ids the vocab lacks
    bool ignore_merges = false;
    int32_t unk_id = -1;
    bool fuse_unk = false;

    /// Registers merge number `rank` of "a" + "b"; throws `corrupt` naming `label` when a token is not in vocab.
    void add_merge(const std::string &a, const std::string &b, int32_t rank, const std::string &label);
    /// Call after vocab and merges are set.
    void finish();
    /// Encodes one pre-token given as raw bytes; appends ids.
    void encode_word(std::string_view bytes, std::vector<int32_t> &out) const;

private:
    struct merge {
        int32_t rank;
        int32_t id;
    };
    std::unordered_map<uint64_t, merge> merges_;
    std::array<int32_t, 256> byte_id_{}; ///< id of each byte's single-character token, -1 when absent
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;

    void merge_word(std::string_view bytes, std::vector<int32_t> &out) const;
};

// ---- tokenizer_json.cpp -------------------------------------------------------------------------------------
/// Everything `load` reads. Filled by `load_tokenizer_files`; immutable afterwards.
struct tokenizer_data {
    std::string json_path;
    bpe_model bpe;
    std::vector<added_token> added;
    added_token_matcher matcher;
    bool has_normalized_added = false;
    bool nfc = false;
    pre_tokenizer pre;
    /// post_processor single template: ids to emit, -1 marking where the sequence goes. Empty: none.
    std::vector<int32_t> post_template;
    std::vector<std::string> decoded; ///< per id: the bytes it decodes to
    std::vector<uint8_t> special;     ///< per id: 1 for special added tokens
    std::unordered_map<std::string, int32_t> added_ids;
    int32_t vocab_size = 0;
    int32_t bos = -1;
    int32_t eos = -1;
    std::vector<int32_t> stop;
    chat_format format = chat_format::none;
    std::string bos_token;
};

/// Loads `path` (directory or tokenizer.json) into `d`; throws fp4moe::error naming the file and field.
void load_tokenizer_files(tokenizer_data &d, const std::string &path);

} // namespace fp4moe::tok
