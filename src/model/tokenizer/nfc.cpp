// Unicode NFC (UAX #15): canonical decomposition, canonical ordering, canonical composition. Tables come from
// gen_nfc_tables.py (Python unicodedata); Hangul syllables are algorithmic. Text that quick-check finds nothing
// to do in (no combining mark, no excluded or second-of-pair character) is returned as is, which is the
// common case, so the cost is one scan.
#include "model/tokenizer/internal.h"

#include <algorithm>
#include <unordered_set>

namespace fp4moe::tok {

namespace {

struct ccc_run {
    uint32_t first, last, ccc;
};
struct decomposition {
    uint32_t cp, a, b, composes;
};

#include "model/tokenizer/nfc_tables.inc"

constexpr uint32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr uint32_t kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount, kSCount = kLCount * kNCount;

struct nfc_data {
    std::unordered_map<uint32_t, std::pair<uint32_t, uint32_t>> decomp;
    std::unordered_map<uint64_t, uint32_t> compose;
    std::unordered_set<uint32_t> needs_check; // decomposable but not a primary composite, or a pair's second

    nfc_data() {
        for (const auto &d : kDecompositions) {
            decomp.emplace(d.cp, std::make_pair(d.a, d.b));
            if (d.composes) {
                compose.emplace((uint64_t{d.a} << 21) | d.b, d.cp);
                needs_check.insert(d.b);
            } else {
                needs_check.insert(d.cp);
            }
        }
    }
};

const nfc_data &data() {
    static const nfc_data d;
    return d;
}

uint32_t ccc(uint32_t cp) {
    if (cp < 0x300) return 0;
    const auto *end = std::end(kCccRuns);
    const auto *it =
        std::upper_bound(std::begin(kCccRuns), end, cp, [](uint32_t c, const ccc_run &r) { return c < r.first; });
    if (it == std::begin(kCccRuns)) return 0;
    --it;
    return cp <= it->last ? it->ccc : 0;
}

bool needs_work(uint32_t cp) {
    if (cp < 0x300) return false;
    if ((cp >= kVBase && cp < kVBase + kVCount) || (cp > kTBase && cp < kTBase + kTCount)) return true;
    return ccc(cp) != 0 || data().needs_check.count(cp) != 0;
}

void decompose(uint32_t cp, std::vector<uint32_t> &out) {
    if (cp >= kSBase && cp < kSBase + kSCount) {
        const uint32_t s = cp - kSBase;
        out.push_back(kLBase + s / kNCount);
        out.push_back(kVBase + (s % kNCount) / kTCount);
        if (s % kTCount) out.push_back(kTBase + s % kTCount);
        return;
    }
    const auto &d = data().decomp;
    const auto it = d.find(cp);
    if (it == d.end()) {
        out.push_back(cp);
        return;
    }
    decompose(it->second.first, out);
    if (it->second.second) decompose(it->second.second, out);
}

uint32_t compose_pair(uint32_t a, uint32_t b) {
    if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
        return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
    if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase && b < kTBase + kTCount)
        return a + (b - kTBase);
    const auto &c = data().compose;
    const auto it = c.find((uint64_t{a} << 21) | b);
    return it == c.end() ? 0 : it->second;
}

} // namespace

std::string nfc(std::string_view s) {
    bool work = false;
    for (size_t i = 0; i < s.size() && !work;) {
        if (static_cast<uint8_t>(s[i]) < 0xCC) { // NOTE: every code point below U+0300 is NFC-inert
            i += static_cast<uint8_t>(s[i]) < 0x80 ? 1 : 2;
            continue;
        }
        work = needs_work(utf8_next(s, i));
    }
    if (!work) return std::string(s);

    std::vector<uint32_t> cps;
    for (size_t i = 0; i < s.size();) decompose(utf8_next(s, i), cps);
    for (size_t i = 0; i < cps.size();) { // canonical ordering: stable sort of each run of non-starters
        if (ccc(cps[i]) == 0) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < cps.size() && ccc(cps[j]) != 0) ++j;
        std::stable_sort(cps.begin() + static_cast<ptrdiff_t>(i), cps.begin() + static_cast<ptrdiff_t>(j),
                         [](uint32_t x, uint32_t y) { return ccc(x) < ccc(y); });
        i = j;
    }
    size_t starter = 0, out_n = 1;
    uint32_t last_class = ccc(cps[0]) ? 256 : 0; // a leading non-starter blocks composition
    for (size_t i = 1; i < cps.size(); ++i) {
        const uint32_t ch = cps[i], cls = ccc(ch);
        const uint32_t composite = compose_pair(cps[starter], ch);
        if (composite && (last_class < cls || last_class == 0)) {
            cps[starter] = composite;
            continue;
        }
        if (cls == 0) starter = out_n;
        last_class = cls;
        cps[out_n++] = ch;
    }
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < out_n; ++i) utf8_append(out, cps[i]);
    return out;
}

} // namespace fp4moe::tok
