// The OpenAI-compatible routes: POST /v1/completions, POST /v1/chat/completions (streamed as server-sent
// events or not), GET /v1/models.
//
// Response shapes follow OpenAI's (and vLLM's extensions: `stop_reason`, finish_reason "abort"/"error"):
//   completions  {"id": "cmpl-...", "object": "text_completion", "created", "model", "choices": [{"index",
//                "text", "logprobs", "finish_reason", "stop_reason"}], "usage": {"prompt_tokens",
//                "completion_tokens", "total_tokens"}}
//   chat         {"id": "chatcmpl-...", "object": "chat.completion", ..., "choices": [{"index", "message":
//                {"role": "assistant", "content"}, "logprobs", "finish_reason", "stop_reason"}], "usage"}
//   streams      `data: {chunk}\n\n` per engine output ("text_completion" / "chat.completion.chunk"; a chat
//                choice's first chunk carries delta.role "assistant"), one finish_reason per choice, then with
//                stream_options.include_usage one chunk with "choices": [] and the usage, then `data: [DONE]`.
// logprobs: the chosen token's log-probability only (completions: logprobs=0 -> tokens, token_logprobs,
// text_offset, top_logprobs with the chosen token; chat: logprobs=true, top_logprobs 0 -> content[].logprob);
// asking for top alternatives is a 400.
#pragma once

#include "server/server_state.h"

#include <httplib.h>

namespace fp4moe::server {

void add_openai_routes(httplib::Server &svr, server_state &state);

} // namespace fp4moe::server
