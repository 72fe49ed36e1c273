#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes a tiny random-weight GGUF of the qwen2 architecture (the architecture of the
Qwen2.5 GGUF that examples/llama_cpp and benchmarks/llm run), for the llama.cpp adapter's ctest:
llama.cpp loads it and runs the same graph (RMS norm, q/k/v with biases, RoPE, GQA attention,
SwiGLU) in milliseconds.

Shape (defaults): 3 layers, 4 query heads, 2 KV heads (GQA group 2), head dim 16, embedding 64,
feed-forward 128, vocabulary 256 token ids, 4096 positions of training context. No tokenizer
(tokenizer.ggml.model = "none"): the tests feed token ids. Weights are F32, drawn from a seeded
normal distribution, so the file is the same bytes on every run.

--arch llama writes the same shape as Llama (no q/k/v biases): the adapter's tests stream it
too, so that a second attention-only architecture is covered.

--arch gemma2 writes the same shape as Gemma 2 (layers 0 and 2 attend through a 32-position
window: llama.cpp keeps a full and a window KV cache), which the adapter governs both of, and
--arch mamba a Mamba model (recurrent memory), which the adapter must reject at construction.

--arch qwen3 (no q/k/v biases, RMS norm on each head's q and k) and --arch gemma3 (those norms
and Gemma 2's post-norms; with --layers 6, its default here, layers 0-4 attend through the
32-position window and layer 5 attends everything, llama.cpp's pattern of 6) are the graphs of
the small models people run most (Qwen3 0.6B, Gemma 3 270M / 1B).

--tokenizer bytes gives the model a SentencePiece-style vocabulary of 259 tokens (<unk>, <s>,
</s> and the 256 byte-fallback tokens <0x00> ... <0xFF>): llama.cpp tokenizes any UTF-8 text into
bytes with it, so examples that take text (examples/llama_cpp/llama_stream) run on the tiny model.

Usage: make_tiny_gguf.py OUT.gguf [--arch qwen2|llama|qwen3|gemma2|gemma3|mamba] [--layers N]
                         [--seed S] [--tokenizer none|bytes]
Needs the `gguf` package from PyPI (0.19.0, the version vendored with llama.cpp 0c1e57098).
"""
import argparse
import sys

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover
    sys.exit("make_tiny_gguf.py: the gguf package is missing (pip install gguf==0.19.0)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--arch", choices=["qwen2", "llama", "qwen3", "gemma2", "gemma3", "mamba"],
                    default="qwen2")
    ap.add_argument("--layers", type=int, default=0, help="default 3 (gemma3: 6)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--head-dim", type=int, default=16)
    ap.add_argument("--ff", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--ctx", type=int, default=4096)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--tokenizer", choices=["none", "bytes"], default="none")
    a = ap.parse_args()
    if a.heads % a.kv_heads:
        ap.error("--heads must be a multiple of --kv-heads")
    if a.tokenizer == "bytes":
        a.vocab = 3 + 256
    if a.layers <= 0:
        a.layers = 6 if a.arch == "gemma3" else 3
    gemma = a.arch in ("gemma2", "gemma3")

    rng = np.random.default_rng(a.seed)
    n_embd = a.heads * a.head_dim
    n_kv = a.kv_heads * a.head_dim

    def mat(rows: int, cols: int, scale: float) -> np.ndarray:
        # numpy shape (rows, cols) is ggml ne = [cols, rows]: rows are output features.
        return (rng.standard_normal((rows, cols)) * scale).astype(np.float32)

    def vec(n: int, mean: float, scale: float) -> np.ndarray:
        return (mean + rng.standard_normal(n) * scale).astype(np.float32)

    w = gguf.GGUFWriter(a.out, a.arch)
    w.add_name("audiokv tiny random " + a.arch)
    w.add_context_length(a.ctx)
    w.add_embedding_length(n_embd)
    w.add_block_count(a.layers)
    w.add_layer_norm_rms_eps(1e-6)
    if a.arch != "mamba":
        w.add_feed_forward_length(a.ff)
        w.add_head_count(a.heads)
        w.add_head_count_kv(a.kv_heads)
        w.add_rope_freq_base(10000.0)
    if gemma:
        w.add_sliding_window(32)
    if a.arch == "mamba":
        w.add_ssm_conv_kernel(4)
        w.add_ssm_inner_size(2 * n_embd)
        w.add_ssm_state_size(8)
        w.add_ssm_time_step_rank(4)
    w.add_vocab_size(a.vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    if a.tokenizer == "bytes":
        # SentencePiece with byte fallback: every byte of the text becomes its <0xNN> token.
        tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
        types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
        types += [gguf.TokenType.BYTE] * 256
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * len(tokens))
        w.add_token_types(types)
        w.add_unk_token_id(0)
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_add_bos_token(True)
    else:
        w.add_tokenizer_model("none")

    s_in = 1.0 / np.sqrt(n_embd)
    # Larger q/k weights give peaked (not uniform) attention, so eviction changes the logits.
    w.add_tensor("token_embd.weight", mat(a.vocab, n_embd, 1.0))
    w.add_tensor("output_norm.weight", vec(n_embd, 1.0, 0.1))
    if not gemma:
        w.add_tensor("output.weight", mat(a.vocab, n_embd, s_in))
    for i in range(a.layers):
        p = f"blk.{i}."
        if a.arch == "mamba":
            d_inner, d_state, dt_rank = 2 * n_embd, 8, 4
            w.add_tensor(p + "attn_norm.weight", vec(n_embd, 1.0, 0.1))
            w.add_tensor(p + "ssm_in.weight", mat(2 * d_inner, n_embd, s_in))
            w.add_tensor(p + "ssm_conv1d.weight", mat(d_inner, 4, 0.5))
            w.add_tensor(p + "ssm_conv1d.bias", vec(d_inner, 0.0, 0.1))
            w.add_tensor(p + "ssm_x.weight", mat(dt_rank + 2 * d_state, d_inner, s_in))
            w.add_tensor(p + "ssm_dt.weight", mat(d_inner, dt_rank, 0.5))
            w.add_tensor(p + "ssm_dt.bias", vec(d_inner, 0.0, 0.1))
            w.add_tensor(p + "ssm_a", -np.abs(mat(d_inner, d_state, 1.0)))
            w.add_tensor(p + "ssm_d", vec(d_inner, 1.0, 0.1))
            w.add_tensor(p + "ssm_out.weight", mat(n_embd, d_inner, s_in))
            continue
        w.add_tensor(p + "attn_norm.weight", vec(n_embd, 1.0, 0.1))
        biases = a.arch == "qwen2"
        w.add_tensor(p + "attn_q.weight", mat(n_embd, n_embd, 2.0 * s_in))
        if biases:
            w.add_tensor(p + "attn_q.bias", vec(n_embd, 0.0, 0.1))
        w.add_tensor(p + "attn_k.weight", mat(n_kv, n_embd, 2.0 * s_in))
        if biases:
            w.add_tensor(p + "attn_k.bias", vec(n_kv, 0.0, 0.1))
        w.add_tensor(p + "attn_v.weight", mat(n_kv, n_embd, s_in))
        if biases:
            w.add_tensor(p + "attn_v.bias", vec(n_kv, 0.0, 0.1))
        if a.arch in ("qwen3", "gemma3"):
            w.add_tensor(p + "attn_q_norm.weight", vec(a.head_dim, 1.0, 0.1))
            w.add_tensor(p + "attn_k_norm.weight", vec(a.head_dim, 1.0, 0.1))
        w.add_tensor(p + "attn_output.weight", mat(n_embd, n_embd, s_in))
        if gemma:
            w.add_tensor(p + "post_attention_norm.weight", vec(n_embd, 1.0, 0.1))
            w.add_tensor(p + "post_ffw_norm.weight", vec(n_embd, 1.0, 0.1))
        w.add_tensor(p + "ffn_norm.weight", vec(n_embd, 1.0, 0.1))
        w.add_tensor(p + "ffn_gate.weight", mat(a.ff, n_embd, s_in))
        w.add_tensor(p + "ffn_up.weight", mat(a.ff, n_embd, s_in))
        w.add_tensor(p + "ffn_down.weight", mat(n_embd, a.ff, 1.0 / np.sqrt(a.ff)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
