#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes the hand-made seeds of wav_fuzzer and model_loader_fuzzer into tests/fuzz/corpus/.

WAV seeds: valid 16-bit PCM (mono, stereo, WAVE_FORMAT_EXTENSIBLE, an odd-sized extra chunk)
and typical corrupt ones. Model seeds: a tiny but complete CTranslate2 WhisperSpec model.bin
(d_model 4, one encoder and one decoder layer, vocabulary 3) that whisper_weights::load
accepts, an int8 variant with per-row scales, and truncations. The policy_fuzzer and
page_granular_fuzzer seeds are fuzzer-grown (libFuzzer -merge) and not regenerated here.
"""
import os
import struct
import sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def chunk(tag, body):
    pad = b"\0" if len(body) % 2 else b""
    return tag + struct.pack("<I", len(body)) + body + pad


def wav(channels=1, rate=16000, samples=8, fmt=1, extensible=False, extra=b""):
    bits = 16
    if extensible:
        body = struct.pack("<HHIIHH", 0xFFFE, channels, rate, rate * 2 * channels, 2 * channels,
                           bits)
        body += struct.pack("<HHI", 22, bits, 0) + struct.pack("<H", fmt) + b"\0" * 14
    else:
        body = struct.pack("<HHIIHH", fmt, channels, rate, rate * 2 * channels, 2 * channels,
                           bits)
    pcm = b"".join(struct.pack("<h", (i * 4097) % 65536 - 32768) for i in range(samples * channels))
    inner = b"WAVE" + chunk(b"fmt ", body) + extra + chunk(b"data", pcm)
    return b"RIFF" + struct.pack("<I", len(inner)) + inner


def s(text):
    b = text.encode() + b"\0"
    return struct.pack("<H", len(b)) + b


def var(name, dims, dtype, payload):
    return s(name) + struct.pack("<B", len(dims)) + b"".join(struct.pack("<I", d) for d in dims) + \
        struct.pack("<BI", dtype, len(payload)) + payload


def f32(dims, value=0.01):
    n = 1
    for d in dims:
        n *= d
    return struct.pack("<%df" % n, *([value] * n))


def model(int8=False):
    d, ff, vocab, ctx = 4, 8, 3, 2
    v = []

    def lin(p, out, inp):
        if int8:
            v.append(var(p + "/weight", [out, inp], 1, bytes([1]) * (out * inp)))
            v.append(var(p + "/weight_scale", [out], 0, f32([out], 100.0)))
        else:
            v.append(var(p + "/weight", [out, inp], 0, f32([out, inp])))
        v.append(var(p + "/bias", [out], 0, f32([out])))

    def ln(p):
        v.append(var(p + "/gamma", [d], 0, f32([d], 1.0)))
        v.append(var(p + "/beta", [d], 0, f32([d])))

    v.append(var("encoder/conv1/weight", [d, 2, 3], 0, f32([d, 2, 3])))
    v.append(var("encoder/conv1/bias", [d], 0, f32([d])))
    v.append(var("encoder/conv2/weight", [d, d, 3], 0, f32([d, d, 3])))
    v.append(var("encoder/conv2/bias", [d], 0, f32([d])))
    v.append(var("encoder/num_heads", [], 3, struct.pack("<i", 2)))
    v.append(var("decoder/num_heads", [], 3, struct.pack("<i", 2)))
    v.append(var("decoder/activation", [], 1, bytes([3])))
    v.append(var("encoder/position_encodings/encodings", [ctx, d], 0, f32([ctx, d])))
    p = "encoder/layer_0/"
    ln(p + "self_attention/layer_norm")
    lin(p + "self_attention/linear_0", 3 * d, d)
    lin(p + "self_attention/linear_1", d, d)
    ln(p + "ffn/layer_norm")
    lin(p + "ffn/linear_0", ff, d)
    lin(p + "ffn/linear_1", d, ff)
    ln("encoder/layer_norm")
    v.append(var("decoder/embeddings/weight", [vocab, d], 4, b"\x00\x3c" * (vocab * d)))  # f16
    v.append(var("decoder/position_encodings/encodings", [ctx, d], 5, b"\x80\x3f" * (ctx * d)))
    p = "decoder/layer_0/"
    ln(p + "self_attention/layer_norm")
    lin(p + "self_attention/linear_0", 3 * d, d)
    lin(p + "self_attention/linear_1", d, d)
    ln(p + "attention/layer_norm")
    lin(p + "attention/linear_0", d, d)
    lin(p + "attention/linear_1", 2 * d, d)
    lin(p + "attention/linear_2", d, d)
    ln(p + "ffn/layer_norm")
    lin(p + "ffn/linear_0", ff, d)
    lin(p + "ffn/linear_1", d, ff)
    ln("decoder/layer_norm")
    aliases = s("decoder/projection/weight") + s("decoder/embeddings/weight")
    return (struct.pack("<I", 6) + s("WhisperSpec") + struct.pack("<II", 3, len(v)) + b"".join(v) +
            struct.pack("<I", 1) + aliases)


def main():
    put("wav_fuzzer", "mono", wav())
    put("wav_fuzzer", "stereo_44k", wav(channels=2, rate=44100, samples=5))
    put("wav_fuzzer", "extensible", wav(extensible=True))
    put("wav_fuzzer", "odd_list_chunk", wav(extra=chunk(b"LIST", b"INFOabc")))
    put("wav_fuzzer", "float_format", wav(fmt=3))
    put("wav_fuzzer", "truncated", wav()[:30])
    put("wav_fuzzer", "empty_data", wav(samples=0))
    put("wav_fuzzer", "not_riff", b"OggS" + b"\0" * 40)
    m = model()
    put("model_loader_fuzzer", "whisper_tiny4", m)
    put("model_loader_fuzzer", "whisper_tiny4_int8", model(int8=True))
    put("model_loader_fuzzer", "truncated", m[: len(m) // 2])
    put("model_loader_fuzzer", "header_only", m[:24])
    put("model_loader_fuzzer", "bad_version", struct.pack("<I", 9) + m[4:64])
    return 0


if __name__ == "__main__":
    sys.exit(main())
