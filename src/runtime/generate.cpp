#include "runtime/generate.h"

#include "runtime/cpu_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <optional>

namespace fp4moe {

namespace {

status bad(std::string msg) {
    return {status_code::invalid_argument, std::move(msg)};
}

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

} // namespace

std::vector<std::int32_t> request_stop_ids(const sampling_params &params, const tokenizer *tok,
                                           const model_config &config) {
    std::vector<std::int32_t> ids(params.stop_token_ids);
    if (params.ignore_eos) return ids;
    if (tok)
        ids.insert(ids.end(), tok->stop_ids().begin(), tok->stop_ids().end());
    else
        for (auto id : config.eos_token_ids) ids.push_back(static_cast<std::int32_t>(id));
    return ids;
}

result<generate_result> generate(model &m, const tokenizer *tok, std::span<const std::int32_t> prompt,
                                 const sampling_params &params, const generate_options &opts,
                                 const text_callback &on_text, const token_callback &on_token) {
    const auto &c = m.config();
    if (auto st = validate(params, c.vocab_size); !st.ok()) return st;
    if (!tok && !params.stop.empty()) return bad("stop strings need a tokenizer (generate was given token ids only)");
    if (prompt.empty()) return bad("the prompt is empty");
    for (std::size_t i = 0; i < prompt.size(); ++i)
        if (prompt[i] < 0 || prompt[i] >= c.vocab_size)
            return bad(
                fmt::format("prompt token {} (id {}) is outside the vocabulary [0, {})", i, prompt[i], c.vocab_size));
    if (opts.max_batch_tokens < 1)
        return bad(fmt::format("max_batch_tokens must be >= 1, got {}", opts.max_batch_tokens));
    if (opts.kv_block_size < 1) return bad(fmt::format("kv_block_size must be >= 1, got {}", opts.kv_block_size));

    // The sequence (prompt + output) fits in `limit` positions; the last output token is never fed back, so the
    // KV cache needs one slot less, but a prompt must leave room for at least one output token.
    const auto n_prompt = static_cast<std::int64_t>(prompt.size());
    std::int64_t limit = c.max_position_embeddings;
    if (opts.kv_capacity_tokens > 0) limit = std::min(limit, opts.kv_capacity_tokens);
    if (n_prompt >= limit)
        return bad(fmt::format("the prompt has {} tokens; the context holds {} (max_position_embeddings {}{}), which "
                               "leaves no room for output",
                               n_prompt, limit, c.max_position_embeddings,
                               opts.kv_capacity_tokens > 0 ? fmt::format(", KV capacity {}", opts.kv_capacity_tokens)
                                                           : std::string{}));
    const std::int64_t total = std::min(limit, n_prompt + params.max_tokens);

    // One sequence owns the whole cache: its block table is simply every block in order.
    const std::int64_t bs = opts.kv_block_size;
    kv_cache kv(c, (total + bs - 1) / bs, bs);
    std::vector<std::int32_t> blocks(static_cast<std::size_t>(kv.num_blocks()));
    std::iota(blocks.begin(), blocks.end(), 0);

    stop_checker stops(params.stop, request_stop_ids(params, tok, c));
    sampler smp(params, prompt);
    std::optional<tokenizer::stream_decoder> dec;
    if (tok) dec.emplace(*tok, params.skip_special_tokens);

    generate_result r;
    r.prompt_tokens = n_prompt;
    r.seed = smp.seed();
    auto emit = [&](std::string s) {
        if (s.empty()) return;
        if (on_text) on_text(s);
        r.text += s;
    };

    std::vector<float> logits;
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t start = 0; start < n_prompt; start += opts.max_batch_tokens) {
        const auto n = std::min(opts.max_batch_tokens, n_prompt - start);
        const seq_step s{prompt.subspan(start, n), start, blocks, false};
        if (auto st = m.forward({&s, 1}, kv, logits); !st.ok()) return st;
    }
    auto t_first = t0;
    std::int64_t pos = n_prompt; // tokens in the KV cache
    for (;;) {
        const auto ch = smp.sample(std::span<float>(logits).first(c.vocab_size));
        if (r.output_ids.empty()) t_first = std::chrono::steady_clock::now();
        r.output_ids.push_back(ch.token);
        if (params.logprobs) r.logprobs.push_back(ch.logprob);
        if (on_token) on_token(ch.token);
        if (stops.is_stop_token(ch.token)) {
            r.finish = "stop";
            r.stop_token = ch.token;
            break;
        }
        if (dec) {
            emit(stops.push(dec->push(ch.token)));
            if (stops.stopped()) {
                r.finish = "stop";
                r.stop_string = stops.matched();
                break;
            }
        }
        if (n_prompt + static_cast<std::int64_t>(r.output_ids.size()) >= total) {
            r.finish = "length";
            break;
        }
        const seq_step s{{&r.output_ids.back(), 1}, pos, blocks, false};
        if (auto st = m.forward({&s, 1}, kv, logits); !st.ok()) return st;
        ++pos;
    }
    if (dec && !stops.stopped()) {
        emit(stops.push(dec->flush()));
        if (stops.stopped()) {
            r.finish = "stop";
            r.stop_string = stops.matched();
        }
        emit(stops.flush());
    }
    r.prefill_seconds = std::chrono::duration<double>(t_first - t0).count();
    r.decode_seconds = seconds_since(t_first);
    return r;
}

result<generate_result> generate(cpu_model &m, const tokenizer &tok, std::span<const std::int32_t> prompt,
                                 const sampling_params &params, const text_callback &on_text,
                                 const generate_options &opts) {
    return generate(m.get(), &tok, prompt, params, opts, on_text);
}

} // namespace fp4moe
