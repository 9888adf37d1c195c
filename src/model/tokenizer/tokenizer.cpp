// The public tokenizer: encode = added-token split -> normalize -> added-token split (normalized tokens) ->
// pre-tokenize -> BPE per piece; decode = per-id bytes (precomputed at load) -> lossy UTF-8.
#include "core/error.h"
#include "model/tokenizer/internal.h"

namespace fp4moe {

struct tokenizer::impl : tok::tokenizer_data {};

tokenizer::tokenizer(std::shared_ptr<const impl> p) : impl_(std::move(p)) {}
tokenizer::~tokenizer() = default;

result<tokenizer> tokenizer::load(const std::string &path) {
    auto p = std::make_shared<impl>();
    const status st = catch_status([&] { tok::load_tokenizer_files(*p, path); });
    if (!st.ok()) return st;
    return tokenizer(std::move(p));
}

result<std::vector<int32_t>> tokenizer::encode(std::string_view text, bool allow_special,
                                               bool add_special_tokens) const {
    if (!tok::utf8_valid(text)) return status(status_code::invalid_argument, "encode: the text is not valid UTF-8");
    const impl &d = *impl_;
    std::vector<int32_t> ids;
    const status st = catch_status([&] {
        std::vector<tok::segment> raw, norm;
        std::vector<std::string_view> pieces;
        std::deque<std::string> storage;
        d.matcher.split(text, false, allow_special, raw);
        for (const tok::segment &s : raw) {
            if (s.id >= 0) {
                ids.push_back(s.id);
                continue;
            }
            const std::string_view part = text.substr(s.begin, s.end - s.begin);
            std::string normalized;
            std::string_view body = part;
            if (d.nfc) {
                normalized = tok::nfc(part);
                body = normalized;
            }
            norm.clear();
            if (d.has_normalized_added)
                d.matcher.split(body, true, allow_special, norm);
            else
                norm.push_back({0, body.size(), -1});
            for (const tok::segment &n : norm) {
                if (n.id >= 0) {
                    ids.push_back(n.id);
                    continue;
                }
                pieces.clear();
                storage.clear();
                d.pre.split(body.substr(n.begin, n.end - n.begin), pieces, storage);
                for (const std::string_view piece : pieces) d.bpe.encode_word(piece, ids);
            }
        }
    });
    if (!st.ok()) return st;
    if (add_special_tokens && !d.post_template.empty()) {
        std::vector<int32_t> out;
        out.reserve(ids.size() + d.post_template.size());
        for (const int32_t t : d.post_template) {
            if (t < 0)
                out.insert(out.end(), ids.begin(), ids.end());
            else
                out.push_back(t);
        }
        return out;
    }
    return ids;
}

std::string tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
    const impl &d = *impl_;
    std::string bytes;
    for (const int32_t id : ids) {
        if (id < 0 || id >= d.vocab_size) continue;
        if (skip_special && d.special[static_cast<size_t>(id)]) continue;
        bytes += d.decoded[static_cast<size_t>(id)];
    }
    return tok::utf8_lossy(bytes);
}

int32_t tokenizer::vocab_size() const {
    return impl_->vocab_size;
}

std::optional<int32_t> tokenizer::token_to_id(std::string_view token) const {
    const std::string key(token);
    if (const auto a = impl_->added_ids.find(key); a != impl_->added_ids.end()) return a->second;
    if (const auto v = impl_->bpe.vocab.find(key); v != impl_->bpe.vocab.end()) return v->second;
    return std::nullopt;
}

std::optional<std::string> tokenizer::id_to_token(int32_t id) const {
    const impl &d = *impl_;
    for (const tok::added_token &t : d.added)
        if (t.id == id) return t.content;
    if (id >= 0 && static_cast<size_t>(id) < d.bpe.id_to_token.size() &&
        !d.bpe.id_to_token[static_cast<size_t>(id)].empty())
        return d.bpe.id_to_token[static_cast<size_t>(id)];
    return std::nullopt;
}

bool tokenizer::is_special(int32_t id) const {
    return id >= 0 && id < impl_->vocab_size && impl_->special[static_cast<size_t>(id)];
}

int32_t tokenizer::bos_id() const {
    return impl_->bos;
}
int32_t tokenizer::eos_id() const {
    return impl_->eos;
}
std::span<const int32_t> tokenizer::stop_ids() const {
    return impl_->stop;
}
chat_format tokenizer::format() const {
    return impl_->format;
}

result<std::string> tokenizer::apply_chat_template(std::span<const chat_message> messages,
                                                   bool add_generation_prompt) const {
    return render_chat(impl_->format, messages, add_generation_prompt, impl_->bos_token);
}

tokenizer::stream_decoder::stream_decoder(const tokenizer &tok, bool skip_special)
    : impl_(tok.impl_), skip_special_(skip_special) {}

std::string tokenizer::stream_decoder::push(int32_t id) {
    const impl &d = *impl_;
    if (id < 0 || id >= d.vocab_size) return {};
    if (skip_special_ && d.special[static_cast<size_t>(id)]) return {};
    pending_ += d.decoded[static_cast<size_t>(id)];
    const size_t hold = tok::utf8_incomplete_tail(pending_);
    std::string out = tok::utf8_lossy(std::string_view(pending_).substr(0, pending_.size() - hold));
    pending_.erase(0, pending_.size() - hold);
    return out;
}

std::string tokenizer::stream_decoder::flush() {
    std::string out = tok::utf8_lossy(pending_);
    pending_.clear();
    return out;
}

} // namespace fp4moe
