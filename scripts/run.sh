#!/usr/bin/env bash
# Sets up, builds, and serves a model on the CPU: `fp4moe serve` (OpenAI-compatible API, SGLang's /generate,
# /health, Prometheus /metrics). With no model given it uses (and if needed creates, saying so) the tiny
# generated model in models/tiny. Prints curl examples, then serves in the foreground (Ctrl-C: finish the
# requests in flight and exit).
# Usage: scripts/run.sh [MODEL_DIR] [fp4moe serve flags, e.g. --api-key K]    (PORT=30000 by default)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh"
bash "$root/scripts/build.sh" >/dev/null
fp4moe=$root/build/tools/fp4moe
model=$root/models/tiny
if [ $# -ge 1 ] && [ "${1#-}" = "$1" ]; then # a first argument that is not a flag is the model
    model=$1
    shift
fi
port=${PORT:-30000}
if [ ! -f "$model/config.json" ]; then
    if [ "$model" != "$root/models/tiny" ]; then echo "run.sh: $model has no config.json" >&2; exit 2; fi
    echo "run.sh: no model given; creating the tiny generated model in $model (random weights, real NVFP4 format)"
    "$fp4moe" make-model --preset tiny --out "$model"
fi
name=$(basename "$model")
echo "\$ fp4moe inspect $model --no-tensors"
"$fp4moe" inspect "$model" --no-tensors
cat <<EOF

Try, from another terminal, once the server says it is listening:
  curl -s http://127.0.0.1:$port/v1/chat/completions -H 'Content-Type: application/json' \\
       -d '{"model": "$name", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 32}'
  curl -sN http://127.0.0.1:$port/v1/completions -H 'Content-Type: application/json' \\
       -d '{"model": "$name", "prompt": "Mixture-of-experts models", "max_tokens": 32, "stream": true}'
  curl -s http://127.0.0.1:$port/generate -H 'Content-Type: application/json' \\
       -d '{"text": "Hello", "sampling_params": {"max_new_tokens": 16, "temperature": 0}}'
  curl -s http://127.0.0.1:$port/metrics | grep -v '^#' | head
  $fp4moe bench serve --url http://127.0.0.1:$port --num-prompts 32 --random-input-len 64 --random-output-len 32

\$ fp4moe serve --model $model --port $port --served-model-name $name $*
EOF
exec "$fp4moe" serve --model "$model" --port "$port" --served-model-name "$name" "$@"
