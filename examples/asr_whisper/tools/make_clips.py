#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the Asterisk-prompt evaluation clips for examples/asr_whisper.

Source: Debian asterisk-core-sounds-en-wav (8 kHz 16-bit mono prompts, one professional voice)
and the prompt texts in asterisk-core-sounds-en's core-sounds-en.txt.gz; with --language L the
same for asterisk-core-sounds-L(-wav) (es: Mexican Spanish, fr: Canadian French, it, ru; one
voice each).

Protocol (deterministic, rerunnable from scratch):
  * prompts: every top-level, dictate/ and followme/ prompt with a WAV and a transcript; stage
    directions in [..] or (..) are removed from the text, prompts left with no words and prompts
    longer than the maximum clip length are dropped;
  * split: a prompt is dev when int(sha1(name)[:8], 16) % 100 < 30, else test (~30/70);
  * clips: within each split, prompts in name order are appended (with 400 ms of silence
    between them) while the clip stays <= 29 s; a clip is emitted once it is >= 20 s; a prompt
    that would overflow a clip shorter than 20 s starts a new clip instead (the short one is
    discarded);
  * the first --dev-clips dev clips and --test-clips test clips are kept (default 15 + 35);
  * --wide-passes P also writes <out>/dev_wide.tsv, a wider dev split for tuning: every dev clip
    and P more passes over the dev prompts, pass p in the order of sha1("p:name") (the same
    audio with other neighbours and clip boundaries; clip ids wdev<p>_NN).

Writes <out>/wav/<clip_id>.wav (8 kHz PCM16) and <out>/manifest.tsv with the columns
clip_id, split, duration_s, wav (relative to <out>), prompts (space separated), reference.
Exits 77 (ctest "skipped") when the sound packages are not installed.
"""
import argparse
import glob
import gzip
import hashlib
import os
import re
import sys
import wave

SOUNDS_ROOT = "/usr/share/asterisk/sounds"
GAP_S = 0.4
# Sub-directories with sentence prompts; digits/, letters/, phonetic/ (single words) and
# silence/ are left out.
SUBDIRS = ("dictate", "followme")


def load_transcripts(path):
    texts = {}
    with gzip.open(path, "rt", encoding="utf-8-sig", errors="replace") as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith(";") or ":" not in line:
                continue
            name, text = line.split(":", 1)
            text = re.sub(r"\[[^\]]*\]|\([^)]*\)|<[^>]*>", " ", text)
            text = " ".join(text.split())
            if re.search(r"[^\W_]", text):
                texts[name.strip()] = text
    return texts


def sounds_dir_of(language):
    """The voice's directory (en_US_f_Allison, es_MX_f_Allison, ...), else the plain one."""
    voices = sorted(glob.glob(os.path.join(SOUNDS_ROOT, language + "_??_[fm]_*")))
    for d in voices + [os.path.join(SOUNDS_ROOT, language)]:
        if os.path.isdir(d):
            return d
    return None


def transcripts_of(language):
    """The prompt texts of asterisk-core-sounds-LANGUAGE."""
    return "/usr/share/doc/asterisk-core-sounds-%s/core-sounds-%s.txt.gz" % (language, language)


def split_of(name):
    return "dev" if int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % 100 < 30 else "test"


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2 or w.getnchannels() != 1:
            return None, 0
        return w.readframes(w.getnframes()), w.getframerate()


def pack_clips(prompts, min_s, max_s):
    """Prompts in the given order appended (GAP_S apart) while a clip stays <= max_s; a clip is
    emitted once it is >= min_s, a shorter one is dropped when the next prompt overflows it."""
    clips, cur, cur_dur = [], [], 0.0
    for name, pcm, dur in prompts:
        add = dur + (GAP_S if cur else 0.0)
        if cur and cur_dur + add > max_s:
            if cur_dur >= min_s:
                clips.append(cur)
            cur, cur_dur, add = [], 0.0, dur
        cur.append((name, pcm, dur))
        cur_dur += add
    if cur and cur_dur >= min_s:
        clips.append(cur)
    return clips


def write_manifest(path, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("clip_id\tsplit\tduration_s\twav\tprompts\treference\n")
        for r in rows:
            f.write("\t".join(r) + "\n")
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="build/data/asr", help="output directory")
    ap.add_argument("--sounds-dir", default=None)
    ap.add_argument("--language", default="en",
                    help="the prompts' language: asterisk-core-sounds-LANGUAGE(-wav) (en, es, fr, "
                         "it, ru)")
    ap.add_argument("--min-s", type=float, default=20.0)
    ap.add_argument("--max-s", type=float, default=29.0)
    ap.add_argument("--dev-clips", type=int, default=15)
    ap.add_argument("--test-clips", type=int, default=35)
    ap.add_argument("--wide-passes", type=int, default=0,
                    help="also write dev_wide.tsv: every dev clip plus N passes over the dev "
                         "prompts in other orders (split dev; for tuning only)")
    args = ap.parse_args()

    lang = args.language
    transcripts = transcripts_of(lang)
    sounds = args.sounds_dir or sounds_dir_of(lang)
    if sounds is None or not os.path.isfile(transcripts):
        print("make_clips: SKIP: asterisk-core-sounds-%s(-wav) not installed (run "
              "scripts/deps/%s)" % (lang, "asr.sh" if lang == "en" else "languages.sh"),
              file=sys.stderr)
        return 77
    texts = load_transcripts(transcripts)

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

    def write_clip(cid, split, clip):
        data = gap.join(p for _, p, _ in clip)
        rel = os.path.join("wav", cid + ".wav")
        with wave.open(os.path.join(args.out, rel), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes(data)
        names = " ".join(n for n, _, _ in clip)
        ref = " ".join(texts[n] for n, _, _ in clip).replace("\t", " ")
        return (cid, split, "%.3f" % (len(data) / 2 / rate), rel, names, ref)

    rows = []
    for split, limit in (("dev", args.dev_clips), ("test", args.test_clips)):
        for i, clip in enumerate(pack_clips(prompts[split], args.min_s, args.max_s)[:limit]):
            rows.append(write_clip("%s%02d" % (split, i), split, clip))
    write_manifest(os.path.join(args.out, "manifest.tsv"), rows)
    if args.wide_passes > 0:
        # Pass 0: every dev clip of the name order; pass p: the dev prompts reordered by
        # sha1("p:name"), so the same prompts meet other neighbours and clip boundaries.
        wide = []
        for p in range(args.wide_passes + 1):
            order = sorted(prompts["dev"],
                           key=lambda x: hashlib.sha1(("%d:%s" % (p, x[0])).encode()).hexdigest())
            for i, clip in enumerate(pack_clips(order if p else prompts["dev"], args.min_s,
                                                args.max_s)):
                cid = "dev%02d" % i if p == 0 else "wdev%d_%02d" % (p, i)
                wide.append(write_clip(cid, "dev", clip))
        write_manifest(os.path.join(args.out, "dev_wide.tsv"), wide)
        print("make_clips: %d wide dev clips (%d passes) -> %s/dev_wide.tsv"
              % (len(wide), args.wide_passes + 1, args.out))
    n_dev = sum(r[1] == "dev" for r in rows)
    total = sum(float(r[2]) for r in rows)
    print("make_clips: %d clips (%d dev, %d test), %.1f min of audio -> %s/manifest.tsv"
          % (len(rows), n_dev, len(rows) - n_dev, total / 60, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
