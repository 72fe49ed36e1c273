#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# The llama.cpp benchmarks of docs/llama_cpp.md: examples/llama_cpp/llama_stream on the
# Qwen2.5-Coder 0.5B Q4_K_M GGUF (scripts/deps/llm_model.sh) and the King James texts
# (benchmarks/llm/make_texts.sh), one thread, niced. Each SUITE appends JSON lines to
# benchmarks/results/llm_<suite>.jsonl (a .partial.jsonl while it runs).
# Usage: benchmarks/llm/run_llm.sh SUITE...
#   dev             adapter scoring variants on the dev text (Exodus), audiokv at 128 cells
#   dev_text        the text-frame rule on the narrative dev text (Exodus 3-14, 1024 tokens, 128,
#                   256 and 512 cells): audiokv with text frames (default) and as audio, variants,
#                   and the baselines it is compared with
#   dev_text4k      the text rules (smooth_text x text_recent_share) on 4096 tokens of that text,
#                   128 to 1024 cells, against streaming_llm, h2o and tova
#   ppl_ref         test text (Genesis), first 8192 tokens: full and context_shift (no adapter)
#   ppl             the same stream: the adapter policies at 128/256/512/1024 cells
#   ppl_oracle      the same stream: oracle_future at 128/256/512/1024 cells (a reference, not
#                   a policy: keeps what the next <budget> tokens of a run without eviction attend
#                   most), then at 128 cells counting the whole rest of that run
#   passkey_once    1024-token pass-key prompts, depths 10/50/90, budget 20%, compressed once
#   passkey_stream  the same prompts, chunked prefill of 64 with eviction between chunks
#   passkey_once2k, passkey_stream2k   both settings on 2048-token prompts (4k, 8k: 4096, 8192)
#                   AUDIOKV_PASSKEY_BUDGET (default 20%) sets the budget of every pass-key suite
#                   (another budget writes llm_<suite>_b<N>.jsonl) and AUDIOKV_PASSKEY_DEPTHS
#                   (default 10,50,90) the depths
#   cost            tokens/s and the adapter's cost split at a 2k context, full and audiokv
#   cost4k          the same at a 4k context (4,096-token prompt), full and audiokv
#   stream16k       a 16k-token stream through 256 cells with n_ctx = budget + margin
# The sizes are what a shared 2-vCPU machine finishes in about two hours (see docs/llama_cpp.md).
# Environment: LLAMA_STREAM (binary, default build/cpu/examples/llama_cpp/llama_stream).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin="${LLAMA_STREAM:-build/cpu/examples/llama_cpp/llama_stream}"
model=build/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf
test_text=build/texts/genesis.txt
dev_text=build/texts/exodus.txt
out=benchmarks/results
mkdir -p "$out"
pk_budget=${AUDIOKV_PASSKEY_BUDGET:-20%}
pk_depths=${AUDIOKV_PASSKEY_DEPTHS:-10,50,90}
pk_suffix=""
[[ $pk_budget != 20% ]] && pk_suffix="_b${pk_budget%\%}"
run() {  # run SUITE ARGS...: appends to llm_SUITE.jsonl
  local suite=$1
  shift
  echo "[llm] $suite: $*" >&2
  nice -n 10 "$bin" --model "$model" --threads 1 --json "$@" \
    | tee -a "$out/llm_$suite.partial.jsonl" || true
}
finish() { mv "$out/llm_$1.partial.jsonl" "$out/llm_$1.jsonl"; }

for suite in "$@"; do
  case "$suite" in
    dev)
      # audiokv at 128 cells on 768 tokens of the dev text, per scoring variant.
      for v in ${AUDIOKV_LLM_DEV_VARIANTS:-"mean mean all" "max mean all" "mean mean late"}; do
        set -- $v
        layers=""
        [[ "$3" == late ]] && layers="--layers 12,13,14,15,16,17,18,19,20,21,22,23"
        run dev --text "$dev_text" --task ppl --policies audiokv --budgets 128 \
          --max-tokens 768 --head-reduce "$1" --layer-reduce "$2" $layers \
          --tag "heads:$1 layers:$2 $3" >/dev/null
      done
      finish dev ;;
    dev_text)
      narrative=(--text build/texts/exodus_narrative.txt --task ppl --max-tokens 1024 --segment 128)
      run dev_text "${narrative[@]}" --policies audiokv --budgets 128,256,512 --text-frame audio \
        --tag "text as audio (before)" >/dev/null
      run dev_text "${narrative[@]}" --policies audiokv --budgets 128,256,512 --tag "text frames" \
        >/dev/null
      run dev_text "${narrative[@]}" --policies audiokv --budgets 128 --audiokv-set recent=64 \
        --tag "text frames, recent 64" >/dev/null
      run dev_text "${narrative[@]}" --policies streaming_llm,h2o,tova --budgets 128,256,512 \
        --tag baseline >/dev/null
      run dev_text "${narrative[@]}" --policies audiokv --budgets 128,256,512 \
        --audiokv-set smooth_text=0 --tag "text unsmoothed" >/dev/null
      run dev_text "${narrative[@]}" --policies audiokv --budgets 128,256,512 \
        --audiokv-set smooth_text=0,recent=64 --tag "text unsmoothed, recent 64" >/dev/null
      run dev_text "${narrative[@]}" --policies audiokv --budgets 512 \
        --audiokv-set smooth_text=0,recent=192 --tag "text unsmoothed, recent 192" >/dev/null
      for a in 0.05 0.1; do
        run dev_text "${narrative[@]}" --policies audiokv --budgets 128,256,512 \
          --audiokv-set alpha=$a --tag "alpha $a" >/dev/null
      done
      finish dev_text ;;
    dev_text4k)
      # The text rules (audiokv_config::smooth_text and text_recent_share) on 4,096 tokens of
      # the narrative dev text: every share x smoothing pair at every budget, then two importance
      # memories (alpha, one field for audio and text: information, not candidates).
      long=(--text build/texts/exodus_narrative.txt --task ppl --max-tokens 4096 --segment 128)
      run dev_text4k "${long[@]}" --policies streaming_llm,h2o,tova --budgets 128,256,512,1024 \
        --tag baseline >/dev/null
      for smooth in 1 0; do
        for share in 0 0.25 0.5 0.75; do
          tag="$([[ $smooth == 1 ]] && echo smoothed || echo unsmoothed), share $share"
          [[ "$smooth $share" == "1 0" ]] && tag="$tag (before)"
          [[ "$smooth $share" == "0 0.75" ]] && tag="$tag (default)"
          run dev_text4k "${long[@]}" --policies audiokv --budgets 128,256,512,1024 \
            --audiokv-set "smooth_text=$smooth,text_share=$share" --tag "$tag" >/dev/null
        done
      done
      for a in 0.6 1.0; do
        run dev_text4k "${long[@]}" --policies audiokv --budgets 128,256,512,1024 \
          --audiokv-set "smooth_text=0,text_share=0,alpha=$a" \
          --tag "unsmoothed, share 0, alpha $a (information)" >/dev/null
      done
      finish dev_text4k ;;
    ppl_ref)
      run ppl_ref --text "$test_text" --task ppl --policies full,context_shift \
        --budgets 128,256,512,1024 --max-tokens 8192 --segment 512 >/dev/null
      finish ppl_ref ;;
    ppl)
      run ppl --text "$test_text" --task ppl --policies audiokv,streaming_llm,h2o,tova \
        --budgets 128,256,512,1024 --max-tokens 8192 --segment 512 >/dev/null
      run ppl --text "$test_text" --task ppl --policies snapkv,uniform_stride,random \
        --budgets 256 --max-tokens 8192 --segment 512 >/dev/null
      finish ppl ;;
    ppl_oracle)
      run ppl_oracle --text "$test_text" --task ppl --policies oracle_future \
        --budgets 128,256,512,1024 --max-tokens 8192 --segment 512 \
        --tag "horizon: the budget" >/dev/null
      run ppl_oracle --text "$test_text" --task ppl --policies oracle_future \
        --budgets 128 --max-tokens 8192 --segment 512 --oracle-horizon 0 \
        --tag "horizon: the rest of the run" >/dev/null
      finish ppl_oracle ;;
    passkey_once | passkey_stream | passkey_once[248]k | passkey_stream[248]k)
      # Compressed once after prefill (once) or chunked prefill with eviction between chunks
      # (stream), on 1,024-token prompts or 2,048, 4,096 and 8,192 (the suffix 2k, 4k, 8k).
      mode=${suite#passkey_}
      k=${mode//[a-z]/}
      mode=${mode%"${k}k"}
      policies=full,audiokv,snapkv,h2o,tova
      [[ $mode == stream ]] && policies=audiokv,context_shift,streaming_llm,h2o,tova
      # The full cache does not depend on the budget: run once, at 20%.
      [[ -n $pk_suffix ]] && policies=${policies#full,}
      run "$suite$pk_suffix" --task passkey --passkey-mode "$mode" \
        --max-tokens $((${k:-1} * 1024)) --depths "$pk_depths" --policies "$policies" \
        --budgets "$pk_budget" >/dev/null
      finish "$suite$pk_suffix" ;;
    cost)
      run cost --text "$test_text" --task generate --policies full,audiokv --budgets 2048 \
        --max-tokens 2048 --chunk 512 --gen 128 >/dev/null
      finish cost ;;
    cost4k)
      run cost4k --text "$test_text" --task generate --policies full,audiokv --budgets 4096 \
        --max-tokens 4096 --chunk 512 --gen 128 >/dev/null
      finish cost4k ;;
    stream16k)
      run stream16k --text "$test_text" --task generate --policies audiokv --budgets 256 \
        --max-tokens 16384 --chunk 512 --gen 4 >/dev/null
      finish stream16k ;;
    *) echo "unknown suite $suite" >&2; exit 2 ;;
  esac
done
