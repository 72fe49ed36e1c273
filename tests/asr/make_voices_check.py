#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks examples/asr_whisper/tools/make_voices.py on a small subset.

Runs the generator twice with --max-clips N into two directories and checks:
  * both runs give the same bytes (manifests and every WAV);
  * manifest.tsv and long.tsv have make_clips.py's header, one row per clip, unique ids, the
    splits dev/test (voice clips) and long (streams);
  * every WAV is mono PCM16 at 16 kHz (voice clips) or 8 kHz (streams), its length matches
    duration_s to the millisecond and lies in 20-29.5 s (voice clips) or 180-300 s (streams);
  * voice clips: no passage is in both splits, and the reference is exactly the listed
    sentences of voice_passages.txt (parsed here independently) joined by spaces;
  * telephone band: less than 0.1% of a voice clip's energy lies above 3.6 kHz or below 200 Hz;
  * noise: a clean clip's 0.25 s lead-in is below -60 dBFS; for SNR s, the clip's mean power over
    its lead-in (noise only) is 10*log10(a * 10^(s/10) + 1) dB with a, the fraction of time
    holding speech, between 0.5 and 1, i.e. in [s - 3.1, s + 0.5] dB.
Exit: 0 pass, 1 fail, 77 skipped (the generator skipped: synthesisers or sounds missing).
"""
import argparse
import filecmp
import os
import subprocess
import sys
import wave

import numpy as np

HEADER = ["clip_id", "split", "duration_s", "wav", "prompts", "reference"]


def passages_of(path):
    out, cur = [], []
    for line in open(path, encoding="utf-8"):
        line = line.strip()
        if line.startswith("#"):
            continue
        if line:
            cur.append(" ".join(line.split()))
        elif cur:
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def read_rows(path):
    lines = open(path, encoding="utf-8").read().splitlines()
    assert lines[0].split("\t") == HEADER, "%s: header %r" % (path, lines[0])
    rows = [dict(zip(HEADER, ln.split("\t"))) for ln in lines[1:]]
    for ln in lines[1:]:
        assert len(ln.split("\t")) == len(HEADER), "%s: row %r" % (path, ln[:80])
    return rows


def check_wav(path, rate, duration_s, lo, hi):
    with wave.open(path, "rb") as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, rate), path
        n = w.getnframes()
        x = np.frombuffer(w.readframes(n), dtype="<i2").astype(np.float64) / 32768.0
    assert abs(n / rate - float(duration_s)) < 1e-3, "%s: %d samples, %s s" % (path, n, duration_s)
    assert lo <= n / rate <= hi, "%s: %.2f s outside [%g, %g]" % (path, n / rate, lo, hi)
    return x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("generator")
    ap.add_argument("--work", required=True)
    ap.add_argument("--max-clips", type=int, default=3)
    args = ap.parse_args()

    outs = [os.path.join(args.work, "a"), os.path.join(args.work, "b")]
    for out in outs:
        r = subprocess.run([sys.executable, args.generator, "--out", out,
                            "--max-clips", str(args.max_clips)])
        if r.returncode == 77:
            print("make_voices_check: SKIP (generator skipped)")
            return 77
        assert r.returncode == 0, "generator exit %d" % r.returncode
    a, b = outs
    for name in ("manifest.tsv", "long.tsv"):
        assert filecmp.cmp(os.path.join(a, name), os.path.join(b, name), shallow=False), name
    wavs = sorted(os.listdir(os.path.join(a, "wav")))
    assert wavs == sorted(os.listdir(os.path.join(b, "wav")))
    for w in wavs:
        assert filecmp.cmp(os.path.join(a, "wav", w), os.path.join(b, "wav", w), shallow=False), w

    passages = passages_of(os.path.join(os.path.dirname(args.generator), "voice_passages.txt"))
    rows = read_rows(os.path.join(a, "manifest.tsv"))
    assert [r["split"] for r in rows].count("dev") == args.max_clips, rows
    assert [r["split"] for r in rows].count("test") == args.max_clips, rows
    assert len({r["clip_id"] for r in rows}) == len(rows)
    used = {"dev": set(), "test": set()}
    for r in rows:
        x = check_wav(os.path.join(a, r["wav"]), 16000, r["duration_s"], 20.0, 29.5)
        tokens = r["prompts"].split()
        snr = tokens[1]
        assert snr in ("snrclean", "snr20", "snr15"), r["prompts"]
        sentences = []
        for t in tokens[2:]:
            k, span = t[1:].split(":")
            first, last = (int(v) for v in span.split("-"))
            used[r["split"]].add(int(k))
            sentences += passages[int(k)][first:last + 1]
        assert r["reference"] == " ".join(sentences), r["clip_id"]

        spec = np.abs(np.fft.rfft(x)) ** 2
        f = np.fft.rfftfreq(len(x), 1.0 / 16000)
        high = spec[f > 3600].sum() / spec.sum()
        low = spec[f < 200].sum() / spec.sum()
        assert high < 1e-3 and low < 1e-3, "%s: band leak %.2e high, %.2e low" % (
            r["clip_id"], high, low)
        lead = np.mean(x[:4000] ** 2)
        if snr == "snrclean":
            assert lead < 1e-6, "%s: lead-in %.1f dBFS" % (r["clip_id"], 10 * np.log10(lead))
        else:
            s = float(snr[3:])
            measured = 10 * np.log10(np.mean(x ** 2) / lead)
            assert s - 3.1 <= measured <= s + 0.5, "%s: %.2f dB for %s" % (
                r["clip_id"], measured, snr)
        print("%s %s %s %.2f s ok" % (r["clip_id"], tokens[0], snr, len(x) / 16000))
    both = used["dev"] & used["test"]
    assert not both, "passages in both splits: %s" % sorted(both)

    long_rows = read_rows(os.path.join(a, "long.tsv"))
    assert long_rows and all(r["split"] == "long" for r in long_rows)
    assert len({r["clip_id"] for r in long_rows}) == len(long_rows)
    for r in long_rows:
        check_wav(os.path.join(a, r["wav"]), 8000, r["duration_s"], 180.0, 300.0)
        assert len(r["prompts"].split()) > 10 and r["reference"], r["clip_id"]
        print("%s %s s ok" % (r["clip_id"], r["duration_s"]))
    print("make_voices_check: %d voice clips, %d long streams, deterministic" % (len(rows),
                                                                                len(long_rows)))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print("make_voices_check: FAIL: %s" % e)
        sys.exit(1)
