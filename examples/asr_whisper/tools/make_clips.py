#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the Asterisk-prompt evaluation clips for examples/asr_whisper.

Source: Debian asterisk-core-sounds-en-wav (8 kHz 16-bit mono prompts, one professional voice)
and the prompt texts in asterisk-core-sounds-en's core-sounds-en.txt.gz.

Protocol (deterministic, rerunnable from scratch):
  * prompts: every top-level, dictate/ and followme/ prompt with a WAV and a transcript; stage
    directions in [..] or (..) are removed from the text, prompts left with no words and prompts
    longer than the maximum clip length are dropped;
  * split: a prompt is dev when int(sha1(name)[:8], 16) % 100 < 30, else test (~30/70);
  * clips: within each split, prompts in name order are appended (with 400 ms of silence
    between them) while the clip stays <= 29 s; a clip is emitted once it is >= 20 s; a prompt
    that would overflow a clip shorter than 20 s starts a new clip instead (the short one is
    discarded);
  * the first --dev-clips dev clips and --test-clips test clips are kept (default 15 + 35).

Writes <out>/wav/<clip_id>.wav (8 kHz PCM16) and <out>/manifest.tsv with the columns
clip_id, split, duration_s, wav (relative to <out>), prompts (space separated), reference.
Exits 77 (ctest "skipped") when the sound packages are not installed.
"""
import argparse
import gzip
import hashlib
import os
import re
import sys
import wave

SOUNDS_DIRS = ["/usr/share/asterisk/sounds/en_US_f_Allison", "/usr/share/asterisk/sounds/en"]
TRANSCRIPTS = "/usr/share/doc/asterisk-core-sounds-en/core-sounds-en.txt.gz"
GAP_S = 0.4
# Sub-directories with sentence prompts; digits/, letters/, phonetic/ (single words) and
# silence/ are left out.
SUBDIRS = ("dictate", "followme")


def load_transcripts(path):
    texts = {}
    with gzip.open(path, "rt", encoding="utf-8", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(";") or ":" not in line:
                continue
            name, text = line.split(":", 1)
            text = re.sub(r"\[[^\]]*\]|\([^)]*\)|<[^>]*>", " ", text)
            text = " ".join(text.split())
            if re.search(r"[A-Za-z0-9]", text):
                texts[name.strip()] = text
    return texts


def split_of(name):
    return "dev" if int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % 100 < 30 else "test"


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            return None, 0
        return w.readframes(w.getnframes()), w.getframerate()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="build/data/asr", help="output directory")
    ap.add_argument("--sounds-dir", default=None)
    ap.add_argument("--min-s", type=float, default=20.0)
    ap.add_argument("--max-s", type=float, default=29.0)
    ap.add_argument("--dev-clips", type=int, default=15)
    ap.add_argument("--test-clips", type=int, default=35)
    args = ap.parse_args()

    sounds = args.sounds_dir or next((d for d in SOUNDS_DIRS if os.path.isdir(d)), None)
    if sounds is None or not os.path.isfile(TRANSCRIPTS):
        print("make_clips: SKIP: asterisk-core-sounds-en(-wav) not installed "
              "(run scripts/deps/asr.sh)", file=sys.stderr)
        return 77
    texts = load_transcripts(TRANSCRIPTS)

    prompts = {"dev": [], "test": []}
    rate = None
    for name in sorted(texts):
        if "/" in name and name.split("/", 1)[0] not in SUBDIRS:
            continue
        path = os.path.join(sounds, name + ".wav")
        if not os.path.isfile(path):
            continue
        pcm, r = read_wav(path)
        if pcm is None:
            continue
        if rate is None:
            rate = r
        if r != rate:
            continue
        dur = len(pcm) / 2 / r
        if dur > args.max_s:
            continue
        prompts[split_of(name)].append((name, pcm, dur))

    os.makedirs(os.path.join(args.out, "wav"), exist_ok=True)
    gap = b"\x00\x00" * int(round(GAP_S * rate))
    rows = []
    for split, limit in (("dev", args.dev_clips), ("test", args.test_clips)):
        clips, cur, cur_dur = [], [], 0.0
        for name, pcm, dur in prompts[split]:
            add = dur + (GAP_S if cur else 0.0)
            if cur and cur_dur + add > args.max_s:
                if cur_dur >= args.min_s:
                    clips.append(cur)
                cur, cur_dur, add = [], 0.0, dur
            cur.append((name, pcm, dur))
            cur_dur += add
        if cur and cur_dur >= args.min_s:
            clips.append(cur)
        for i, clip in enumerate(clips[:limit]):
            cid = "%s%02d" % (split, i)
            data = gap.join(p for _, p, _ in clip)
            rel = os.path.join("wav", cid + ".wav")
            with wave.open(os.path.join(args.out, rel), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(rate)
                w.writeframes(data)
            names = " ".join(n for n, _, _ in clip)
            ref = " ".join(texts[n] for n, _, _ in clip).replace("\t", " ")
            rows.append((cid, split, "%.3f" % (len(data) / 2 / rate), rel, names, ref))

    tmp = os.path.join(args.out, "manifest.tsv.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("clip_id\tsplit\tduration_s\twav\tprompts\treference\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    os.replace(tmp, os.path.join(args.out, "manifest.tsv"))
    n_dev = sum(r[1] == "dev" for r in rows)
    total = sum(float(r[2]) for r in rows)
    print("make_clips: %d clips (%d dev, %d test), %.1f min of audio -> %s/manifest.tsv"
          % (len(rows), n_dev, len(rows) - n_dev, total / 60, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
