// Byte-level BPE merge, as `tokenizers`' Word::merge_all: symbols start as one token per byte; repeatedly merge
// the adjacent pair of lowest merge rank (leftmost on ties), using a min-heap of candidate pairs over a linked
// list of symbols; a popped candidate whose symbols changed since it was pushed is skipped. Results are cached
// per pre-token (keyed by its bytes).
#include "core/error.h"
#include "model/tokenizer/internal.h"

#include <queue>

namespace fp4moe::tok {

namespace {

constexpr size_t kCacheCapacity = 1 << 16;
constexpr size_t kCacheMaxWord = 256; // bytes; longer pieces are rare and not worth keeping

uint64_t pair_key(int32_t a, int32_t b) {
    return (uint64_t{static_cast<uint32_t>(a)} << 32) | static_cast<uint32_t>(b);
}

} // namespace

void bpe_model::add_merge(const std::string &a, const std::string &b, int32_t rank, const std::string &label) {
    const auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || iab == vocab.end()) {
        const std::string &missing = ia == vocab.end() ? a : ib == vocab.end() ? b : a + b;
        fail(status_code::corrupt, "{}: field 'model.merges' entry {} (\"{} {}\"): token \"{}\" is not in model.vocab",
             label, rank, a, b, missing);
    }
    // NOTE: a repeated pair keeps its last rank, as `tokenizers` (a HashMap built in list order) does
    merges_.insert_or_assign(pair_key(ia->second, ib->second), merge{rank, iab->second});
}

void bpe_model::finish() {
    const auto &table = byte_to_unicode();
    for (int b = 0; b < 256; ++b) {
        std::string s;
        utf8_append(s, table[b]);
        const auto it = vocab.find(s);
        byte_id_[b] = it == vocab.end() ? -1 : it->second;
    }
}

void bpe_model::merge_word(std::string_view bytes, std::vector<int32_t> &out) const {
    struct symbol {
        int32_t id;
        int32_t prev, next; // -1 at the ends
        bool alive;
    };
    std::vector<symbol> sym;
    sym.reserve(bytes.size());
    for (const char c : bytes) {
        int32_t id = byte_id_[static_cast<uint8_t>(c)];
        if (id < 0) {
            if (unk_id < 0) continue; // NOTE: `tokenizers` drops a character it has no token for
            if (fuse_unk && !sym.empty() && sym.back().id == unk_id) continue;
            id = unk_id;
        }
        const auto n = static_cast<int32_t>(sym.size());
        sym.push_back({id, n - 1, -1, true});
        if (n > 0) sym[n - 1].next = n;
    }
    struct cand {
        int32_t rank, pos, id;
        bool operator>(const cand &o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<cand, std::vector<cand>, std::greater<cand>> heap;
    auto push = [&](int32_t pos) {
        const int32_t nx = sym[pos].next;
        if (nx < 0) return;
        const auto it = merges_.find(pair_key(sym[pos].id, sym[nx].id));
        if (it != merges_.end()) heap.push({it->second.rank, pos, it->second.id});
    };
    for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) push(i);
    while (!heap.empty()) {
        const cand c = heap.top();
        heap.pop();
        symbol &s = sym[c.pos];
        if (!s.alive || s.next < 0) continue;
        const auto it = merges_.find(pair_key(s.id, sym[s.next].id));
        if (it == merges_.end() || it->second.rank != c.rank || it->second.id != c.id) continue; // stale
        symbol &r = sym[s.next];
        r.alive = false;
        s.id = c.id;
        s.next = r.next;
        if (r.next >= 0) sym[r.next].prev = c.pos;
        if (s.prev >= 0) push(s.prev);
        push(c.pos);
    }
    for (const symbol &s : sym)
        if (s.alive) out.push_back(s.id);
}

void bpe_model::encode_word(std::string_view bytes, std::vector<int32_t> &out) const {
    if (bytes.empty()) return;
    const bool cacheable = bytes.size() <= kCacheMaxWord;
    if (cacheable) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        const auto it = cache_.find(std::string(bytes));
        if (it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::vector<int32_t> ids;
    if (ignore_merges) {
        const auto it = vocab.find(byte_level_encode(bytes));
        if (it != vocab.end()) ids.push_back(it->second);
    }
    if (ids.empty()) merge_word(bytes, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (cacheable) {
        std::lock_guard<std::mutex> lock(cache_mutex_);
        if (cache_.size() >= kCacheCapacity) cache_.clear();
        cache_.emplace(std::string(bytes), std::move(ids));
    }
}

} // namespace fp4moe::tok
