#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Builds the multi-voice telephone clips and the long Asterisk streams for examples/asr_whisper.

Sources (Debian packages only, installed by scripts/deps/asr.sh):
  * espeak-ng (formant synthesis, two voice variants with their own speed and pitch), flite (CMU
    voices slt, rms, awb, kal16) and festival (kal and ked diphone voices, slt HTS voice) read the
    passages of tools/voice_passages.txt, which were written for this project;
  * asterisk-core-sounds-en(-wav) prompts for the long streams (same prompt list and text
    cleaning as tools/make_clips.py).

Voice clips (split dev/test by text: passage k is dev when k % 3 == 0, else test):
  * each passage is read by one voice, sentence by sentence; each sentence is synthesised on its
    own, resampled to 16 kHz, trimmed of silence, and the sentences are joined with pauses of
    0.35-0.70 s, behind 0.30 s of lead-in and before 0.30 s of tail, while the clip stays
    <= --max-s; a clip shorter than --min-s takes sentences from the next passage of its split;
  * the voice of the i-th clip of a split is VOICES[i % n] (n voices), its noise level
    SNRS[(i + i // 3 + i // n) % 3]: every voice appears in both splits, neighbouring voices of
    one pass get different SNRs, and each new pass over the voices shifts every voice's SNR;
  * noise: Gaussian noise with a 1/f power spectrum (pink), from a PCG64 generator seeded by
    sha1("<seed>:<clip_id>"); both speech and noise pass the telephone band (below), and the
    noise is scaled so that the band-limited speech power over the sentences divided by the
    band-limited noise power equals the SNR: clean (no noise), 20 dB or 15 dB (at 10 dB,
    tiny.en's full-cache WER is above 40% for all kept voices but one, which leaves little to
    measure);
  * telephone channel: band-pass 300-3400 Hz (raised-cosine edges 200-400 Hz and 3300-3500 Hz,
    applied in the frequency domain), decimation to 8 kHz, mu-law companding (mu = 255, 8-bit
    codes, as G.711) at a peak of half full scale, interpolation back to 16 kHz (frequency-domain
    zero padding);
  * reference: the sentences read, joined by spaces (asr_whisper's WER normalises case,
    punctuation and spelled numbers).

--wide-passes P also writes <out>/dev_wide.tsv, a wider dev split for tuning: the dev clips and
P more passes over the dev passages, clip i continuing the rotation above (voice VOICES[i % n],
its SNR, first passage i mod the dev passages), so each dev passage is read again by other
voices at other SNRs (clip ids wvdev<p>_NN).

Long streams (split "long"): Asterisk prompts of one make_clips split, in name order, joined with
400 ms of silence into ceil(total / --long-max-s) streams of about equal length (a stream closes
once it reaches total / count, or before it would pass --long-max-s); streams shorter than
--long-min-s are dropped (defaults 180 and 300 s); streams longdevNN use dev prompts, longtestNN
test prompts, so tuning on longdev leaves the test prompts unseen. 8 kHz PCM16, as the prompts.

Writes <out>/wav/*.wav (PCM16 mono), <out>/manifest.tsv (dev and test voice clips) and
<out>/long.tsv (long streams), both with make_clips.py's columns: clip_id, split, duration_s,
wav (relative to <out>), prompts (space separated: voice, snr, passage:first-last sentence for
voice clips; prompt names for long streams), reference. Same inputs and tool versions give the
same bytes. Exits 77 (ctest "skipped") when a synthesiser or the sound packages are missing.
"""
import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import wave

import numpy as np

TOOLS_DIR = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS_DIR)
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import make_clips  # noqa: E402  (prompt list, transcripts and dev/test split of the Asterisk set)

RATE = 16000
LEAD_S = 0.30
PAUSE_S = (0.35, 0.70)
LONG_GAP_S = 0.4
SNRS = ("clean", "20", "15")

# name, engine, engine arguments. A voice is kept when Whisper tiny.en's full-cache WER on dev
# passages, averaged over the three noise levels, stays below about 30%; the candidates in DROPPED
# did not (espeak-ng's formant voices lose most through the telephone band and the noise), and
# --voices still accepts them.
VOICES = [
    ("espeak-us-f2", "espeak", ["-v", "en-us+f2", "-s", "140", "-p", "55"]),
    ("flite-slt", "flite", ["-voice", "slt"]),
    ("festival-kal", "festival", ["(voice_kal_diphone)"]),
    ("espeak-us-f5", "espeak", ["-v", "en-us+f5", "-s", "140", "-p", "50"]),
    ("flite-rms", "flite", ["-voice", "rms", "--setf", "duration_stretch=1.1"]),
    ("festival-slt-hts", "festival", ["(voice_cmu_us_slt_arctic_hts)"]),
    ("flite-awb", "flite", ["-voice", "awb"]),
    ("festival-ked", "festival", ["(voice_ked_diphone)"]),
    ("flite-kal16", "flite", ["-voice", "kal16", "--setf", "int_f0_target_mean=125"]),
]
DROPPED = [
    ("espeak-us-m3", "espeak", ["-v", "en-us+m3", "-s", "165", "-p", "45"]),
    ("espeak-gb-f2", "espeak", ["-v", "en-gb+f2", "-s", "150", "-p", "60"]),
    ("espeak-rp-m1", "espeak", ["-v", "en-gb-x-rp+m1", "-s", "175", "-p", "35"]),
    ("espeak-us-f4", "espeak", ["-v", "en-us+f4", "-s", "140", "-p", "70"]),
    ("espeak-scot-m7", "espeak", ["-v", "en-gb-scotland+m7", "-s", "155", "-p", "40"]),
    ("espeak-029-m2", "espeak", ["-v", "en-029+m2", "-s", "160", "-p", "50"]),
    ("espeak-us-m1", "espeak", ["-v", "en-us+m1", "-s", "135", "-p", "45", "-g", "3"]),
    ("espeak-gb-m3", "espeak", ["-v", "en-gb+m3", "-s", "140", "-p", "40"]),
    ("espeak-us-klatt", "espeak", ["-v", "en-us+klatt", "-s", "140", "-p", "50"]),
    ("espeak-us-f1", "espeak", ["-v", "en-us+f1", "-s", "140", "-p", "50"]),
    ("espeak-us-f3", "espeak", ["-v", "en-us+f3", "-s", "140", "-p", "50"]),
]

ENGINES = {"espeak": "espeak-ng", "flite": "flite", "festival": "text2wave"}


def read_wav_float(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            raise ValueError("%s: expected 16-bit PCM" % path)
        n_ch = w.getnchannels()
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64)
        rate = w.getframerate()
    if n_ch > 1:
        x = x.reshape(-1, n_ch).mean(axis=1)
    return x / 32768.0, rate


def write_wav(path, pcm16, rate):
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16.astype("<i2").tobytes())


def resample_fft(x, rate_in, rate_out):
    """Band-limited resampling by truncating or zero-padding the real spectrum."""
    if rate_in == rate_out:
        return x.copy()
    n = len(x)
    n_out = int(round(n * rate_out / rate_in))
    spec = np.fft.rfft(x)
    out = np.zeros(n_out // 2 + 1, dtype=complex)
    k = min(len(spec), len(out))
    out[:k] = spec[:k]
    return np.fft.irfft(out, n_out) * (n_out / n)


def synthesize(engine, args, text, tmp):
    txt = os.path.join(tmp, "s.txt")
    wav = os.path.join(tmp, "s.wav")
    with open(txt, "w", encoding="utf-8") as f:
        f.write(text + "\n")
    if engine == "espeak":
        cmd = ["espeak-ng"] + args + ["-f", txt, "-w", wav]
    elif engine == "flite":
        cmd = ["flite"] + args + ["-f", txt, "-o", wav]
    else:
        cmd = ["text2wave", "-eval", args[0], "-o", wav, txt]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    x, rate = read_wav_float(wav)
    return resample_fft(x, rate, RATE)


def trim_silence(x, margin_s=0.03):
    """Keeps the span from the first to the last 10 ms frame whose peak exceeds 2% of the peak."""
    hop = RATE // 100
    n = len(x) // hop
    if n == 0:
        return x
    peaks = np.abs(x[: n * hop]).reshape(n, hop).max(axis=1)
    on = np.nonzero(peaks > 0.02 * peaks.max())[0]
    if len(on) == 0:
        return x[:0]
    m = int(margin_s * RATE)
    return x[max(0, on[0] * hop - m): min(len(x), (on[-1] + 1) * hop + m)]


def telephone_band(n, rate):
    """Raised-cosine band-pass gains for the rfft bins of an n-sample signal at `rate`."""
    f = np.arange(n // 2 + 1) * rate / n

    def edge(lo, hi):  # 0 below lo, 1 above hi
        t = np.clip((f - lo) / (hi - lo), 0.0, 1.0)
        return 0.5 - 0.5 * np.cos(np.pi * t)

    return edge(200.0, 400.0) * (1.0 - edge(3300.0, 3500.0))


def mu_law(x, mu=255.0, levels=128):
    """G.711-style mu-law companding of x in [-1, 1] with 8-bit codes (sign + 7 magnitude bits)."""
    y = np.sign(x) * np.log1p(mu * np.abs(x)) / np.log1p(mu)
    y = np.round(y * (levels - 1)) / (levels - 1)
    return np.sign(y) * np.expm1(np.abs(y) * np.log1p(mu)) / mu


def clip_rng(seed, clip_id):
    h = int(hashlib.sha1(("%d:%s" % (seed, clip_id)).encode()).hexdigest()[:16], 16)
    return np.random.Generator(np.random.PCG64(h))


def gaussian(rng, n):
    """Box-Muller from uniform doubles (stable across NumPy versions, unlike standard_normal)."""
    m = (n + 1) // 2
    u1 = 1.0 - rng.random(m)
    u2 = rng.random(m)
    r = np.sqrt(-2.0 * np.log(u1))
    return np.concatenate([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)])[:n]


def telephone_clip(speech, active, snr, rng):
    """speech at 16 kHz, boolean mask of sentence samples -> telephone-channel audio at 16 kHz."""
    n = len(speech) + (len(speech) % 2)  # even length: the 8 kHz signal has exactly n / 2 samples
    x = np.zeros(n)
    x[: len(speech)] = speech
    mask = np.zeros(n, dtype=bool)
    mask[: len(active)] = active
    band = telephone_band(n, RATE)
    s_spec = np.fft.rfft(x) * band
    if snr != "clean":
        f = np.arange(n // 2 + 1) * RATE / n
        n_spec = np.fft.rfft(gaussian(rng, n)) / np.sqrt(np.maximum(f, 50.0)) * band
        s_band = np.fft.irfft(s_spec, n)
        n_band = np.fft.irfft(n_spec, n)
        p_s = np.mean(s_band[mask] ** 2)
        p_n = np.mean(n_band ** 2)
        s_spec = s_spec + n_spec * np.sqrt(p_s / (p_n * 10.0 ** (float(snr) / 10.0)))
    half = n // 2
    tel = np.fft.irfft(s_spec[: half // 2 + 1], half) * 0.5  # 8 kHz, all content below 3.5 kHz
    tel = mu_law(0.5 * tel / np.max(np.abs(tel)))
    spec8 = np.fft.rfft(tel)
    up = np.zeros(half + 1, dtype=complex)
    up[: len(spec8)] = spec8
    if half % 2 == 0:
        up[half // 2] *= 0.5  # the 4 kHz bin is shared by both halves of the 16 kHz spectrum
    y = np.fft.irfft(up, n) * 2.0
    return np.clip(np.round(y[: len(speech)] * 32767.0), -32768, 32767).astype(np.int16)


def load_passages(path):
    passages, cur = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("#"):
                continue
            if not line:
                if cur:
                    passages.append(cur)
                cur = []
                continue
            cur.append(" ".join(line.split()))
    if cur:
        passages.append(cur)
    return passages


def build_voice_clip(clip_id, voice, snr, order, passages, args, tmp):
    """Reads sentences of passages[order[0]], then order[1], ... until the clip is full."""
    name, engine, eargs = voice
    rng = clip_rng(args.seed, clip_id)
    lead = np.zeros(int(LEAD_S * RATE))
    pieces, active, words, used = [lead], [np.zeros(len(lead), dtype=bool)], [], []
    total = 2 * len(lead)
    full = False
    for k in order:
        first = None
        for j, sentence in enumerate(passages[k]):
            s = trim_silence(synthesize(engine, eargs, sentence, tmp))
            pause = int(round(rng.uniform(*PAUSE_S) * RATE)) if len(pieces) > 1 else 0
            if (total + pause + len(s)) / RATE > args.max_s:
                full = True
                break
            if pause:
                pieces.append(np.zeros(pause))
                active.append(np.zeros(pause, dtype=bool))
            pieces.append(s)
            active.append(np.ones(len(s), dtype=bool))
            total += pause + len(s)
            words.append(sentence)
            first = j if first is None else first
            last = j
        if first is not None:
            used.append("p%02d:%d-%d" % (k, first, last))
        if full or total / RATE >= args.min_s:
            break
    pieces.append(lead)
    active.append(np.zeros(len(lead), dtype=bool))
    speech = np.concatenate(pieces)
    if len(speech) / RATE < args.min_s:
        raise RuntimeError("%s: only %.1f s of speech from %s"
                           % (clip_id, len(speech) / RATE, name))
    pcm = telephone_clip(speech, np.concatenate(active), snr, rng)
    prompts = " ".join([name, "snr" + snr] + used)
    return pcm, prompts, " ".join(words)


def build_long_streams(args, out_dir):
    sounds = args.sounds_dir or make_clips.sounds_dir_of("en")
    texts = make_clips.load_transcripts(make_clips.transcripts_of("en"))
    prompts = {"dev": [], "test": []}
    rate = None
    for name in sorted(texts):
        if "/" in name and name.split("/", 1)[0] not in make_clips.SUBDIRS:
            continue
        path = os.path.join(sounds, name + ".wav")
        if not os.path.isfile(path):
            continue
        pcm, r = make_clips.read_wav(path)
        if pcm is None:
            continue
        rate = rate or r
        if r != rate:
            continue
        prompts[make_clips.split_of(name)].append((name, pcm, len(pcm) / 2 / r))
    gap = b"\x00\x00" * int(round(LONG_GAP_S * rate))
    rows = []
    for split in ("dev", "test"):
        total = sum(d for _, _, d in prompts[split]) + LONG_GAP_S * (len(prompts[split]) - 1)
        target = total / max(1, int(np.ceil(total / args.long_max_s)))
        streams, cur, cur_dur = [], [], 0.0
        for name, pcm, dur in prompts[split]:
            add = dur + (LONG_GAP_S if cur else 0.0)
            if cur and cur_dur + add > args.long_max_s:
                streams.append(cur)
                cur, cur_dur, add = [], 0.0, dur
            cur.append((name, pcm))
            cur_dur += add
            if cur_dur >= target:
                streams.append(cur)
                cur, cur_dur = [], 0.0
        if cur:
            streams.append(cur)
        limit = args.max_clips if args.max_clips >= 0 else len(streams)
        streams = [s for s in streams if (len(gap) * (len(s) - 1) + sum(len(p) for _, p in s))
                   / 2 / rate >= args.long_min_s][:limit]
        for i, stream in enumerate(streams):
            cid = "long%s%02d" % (split, i)
            data = gap.join(p for _, p in stream)
            rel = os.path.join("wav", cid + ".wav")
            with wave.open(os.path.join(out_dir, rel), "wb") as w:
                w.setnchannels(1)
                w.setsampwidth(2)
                w.setframerate(rate)
                w.writeframes(data)
            ref = " ".join(texts[n] for n, _ in stream).replace("\t", " ")
            rows.append((cid, "long", "%.3f" % (len(data) / 2 / rate), rel,
                         " ".join(n for n, _ in stream), ref))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--out", default="build/data/voices", help="output directory")
    ap.add_argument("--passages", default=os.path.join(TOOLS_DIR, "voice_passages.txt"))
    ap.add_argument("--voices", default="", help="comma-separated voice names (default: all kept)")
    ap.add_argument("--list-voices", action="store_true", help="print the voice table and exit")
    ap.add_argument("--max-clips", type=int, default=-1,
                    help="at most N clips per split (dev, test, longdev, longtest); -1: all")
    ap.add_argument("--min-s", type=float, default=20.0)
    ap.add_argument("--max-s", type=float, default=29.5)
    ap.add_argument("--long-min-s", type=float, default=180.0)
    ap.add_argument("--long-max-s", type=float, default=300.0)
    ap.add_argument("--no-long", action="store_true", help="skip the long Asterisk streams")
    ap.add_argument("--sounds-dir", default=None)
    ap.add_argument("--seed", type=int, default=20240)
    ap.add_argument("--wide-passes", type=int, default=0,
                    help="also write dev_wide.tsv: every dev clip plus N more passes over the "
                         "dev passages with other voices and SNRs (split dev; for tuning only)")
    args = ap.parse_args()

    if args.list_voices:
        for name, engine, eargs in VOICES:
            print("%-18s %-9s %s" % (name, engine, " ".join(eargs)))
        return 0
    voices = VOICES
    if args.voices:
        by_name = {v[0]: v for v in VOICES + DROPPED}
        unknown = [v for v in args.voices.split(",") if v not in by_name]
        if unknown:
            print("make_voices: unknown voice(s) %s (see --list-voices)" % ",".join(unknown),
                  file=sys.stderr)
            return 2
        voices = [by_name[v] for v in args.voices.split(",")]
    missing = sorted({ENGINES[e] for _, e, _ in voices if shutil.which(ENGINES[e]) is None})
    if missing:
        print("make_voices: SKIP: %s not installed (run scripts/deps/asr.sh)" % ", ".join(missing),
              file=sys.stderr)
        return 77
    if not args.no_long:
        sounds = args.sounds_dir or make_clips.sounds_dir_of("en")
        if sounds is None or not os.path.isfile(make_clips.transcripts_of("en")):
            print("make_voices: SKIP: asterisk-core-sounds-en(-wav) not installed "
                  "(run scripts/deps/asr.sh)", file=sys.stderr)
            return 77

    t0 = time.time()
    passages = load_passages(args.passages)
    by_split = {"dev": [k for k in range(len(passages)) if k % 3 == 0],
                "test": [k for k in range(len(passages)) if k % 3 != 0]}
    os.makedirs(os.path.join(args.out, "wav"), exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="make_voices") as tmp:
        for split in ("dev", "test"):
            ks = by_split[split]
            limit = len(ks) if args.max_clips < 0 else min(args.max_clips, len(ks))
            n = len(voices)
            for i in range(limit):
                cid = "v%s%02d" % (split, i)
                voice = voices[i % n]
                snr = SNRS[(i + i // 3 + i // n) % len(SNRS)]
                order = ks[i:] + ks[:i]
                pcm, prompts, ref = build_voice_clip(cid, voice, snr, order, passages, args, tmp)
                rel = os.path.join("wav", cid + ".wav")
                write_wav(os.path.join(args.out, rel), pcm, RATE)
                rows.append((cid, split, "%.3f" % (len(pcm) / RATE), rel, prompts,
                             ref.replace("\t", " ")))
        if args.wide_passes > 0:
            # Passes 1..P continue clip i's rotation of voices, SNRs and first passages past the
            # dev passages, so each dev passage is read again by other voices at other SNRs.
            ks, n = by_split["dev"], len(voices)
            wide = [r for r in rows if r[1] == "dev"]
            for i in range(len(ks), (args.wide_passes + 1) * len(ks)):
                cid = "wvdev%d_%02d" % (i // len(ks), i % len(ks))
                voice = voices[i % n]
                snr = SNRS[(i + i // 3 + i // n) % len(SNRS)]
                j = i % len(ks)
                pcm, prompts, ref = build_voice_clip(cid, voice, snr, ks[j:] + ks[:j], passages,
                                                     args, tmp)
                rel = os.path.join("wav", cid + ".wav")
                write_wav(os.path.join(args.out, rel), pcm, RATE)
                wide.append((cid, "dev", "%.3f" % (len(pcm) / RATE), rel, prompts,
                             ref.replace("\t", " ")))
            make_clips.write_manifest(os.path.join(args.out, "dev_wide.tsv"), wide)
    make_clips.write_manifest(os.path.join(args.out, "manifest.tsv"), rows)
    long_rows = [] if args.no_long else build_long_streams(args, args.out)
    if long_rows:
        make_clips.write_manifest(os.path.join(args.out, "long.tsv"), long_rows)
    n_dev = sum(r[1] == "dev" for r in rows)
    total = sum(float(r[2]) for r in rows)
    long_total = sum(float(r[2]) for r in long_rows)
    print("make_voices: %d voice clips (%d dev, %d test, %d voices), %.1f min -> %s/manifest.tsv; "
          "%d long streams, %.1f min -> %s/long.tsv; %.1f s"
          % (len(rows), n_dev, len(rows) - n_dev, len(voices), total / 60, args.out,
             len(long_rows), long_total / 60, args.out, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
