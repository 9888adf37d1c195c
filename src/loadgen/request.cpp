#include "loadgen/request.h"

namespace fp4moe::loadgen {

const char *backend_name(backend_kind b) {
    return b == backend_kind::sglang ? "sglang" : "openai";
}

} // namespace fp4moe::loadgen
