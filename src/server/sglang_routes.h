// SGLang's native routes, so that `python -m sglang.bench_serving --backend sglang` (and other SGLang clients)
// run against us unchanged:
//   POST /generate      request: {"text" | "input_ids", "sampling_params": {...}, "stream", "rid",
//                       "return_logprob"}; response: {"text", "output_ids", "meta_info": {"id",
//                       "finish_reason", "prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency"
//                       (final), "output_token_logprobs" (with return_logprob: [[logprob, id, null], ...])}}.
//                       Streamed: one `data: {...}\n\n` per engine output with the *cumulative* text and
//                       output_ids and the running completion_tokens (bench_serving splits each chunk's gap
//                       over the new tokens), finish_reason null until the last, then `data: [DONE]`.
//                       finish_reason: {"type": "length", "length": N}, {"type": "stop", "matched": id or
//                       "string"}, {"type": "abort", "message": ...}.
//   GET /server_info, GET /get_server_info   the options the server runs with (bench_serving reads
//                       internal_states[0] after a run).
//   POST /flush_cache   200: there is no prefix cache to flush.
#pragma once

#include "server/server_state.h"

#include <httplib.h>

namespace fp4moe::server {

void add_sglang_routes(httplib::Server &svr, server_state &state);

} // namespace fp4moe::server
