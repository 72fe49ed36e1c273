#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The streaming protocol's end rollback on a clip where it acts (Whisper tiny.en, full cache).

The clip: eleven Asterisk dev prompts 0.4 s apart (the wide dev split's wdev3_08, rebuilt here
from the prompts alone), in two settings of the longest repeated span the rules look at:
- --repeat-span-max 8 --repeat-advance 0 (the defaults before 32 and 5): tiny.en emits
  "... something is terribly wrong. something is terribly" and, every frame revealed, would
  repeat the span again: with --end-rollbacks 0 the end stop ends the output there;
- the defaults (span 32, advance 5): after the first sentence tiny.en says it again ("I'm
  sorry, there are no matches for those keywords." twice, 24 tokens); with --end-rollbacks 0
  the end stop ends the output there, 43 word errors.
With the default end rollback the output is cut back to where the span's first copy began and
decoding goes on over every frame. Checks, in each setting (span S):
1. --end-rollbacks 0: no rollback, and the output is what the end stop leaves;
2. the default: at least one rollback and at most 4; the output keeps every token before the
   first cut (its common prefix with run 1 is at most 2 S - 1 tokens shorter than run 1) and
   differs from run 1 (decoding went on from the cut);
3. both runs reach end of text and neither is a runaway;
4. with the default span, the rollback's transcript has fewer word errors than the end stop's.
Where the end stop's output does not end as it does on x86-64 (other numerics), it is skipped.

usage: end_rollback_check.py ASR_WHISPER_BINARY [--work DIR]
Exit: 0 pass, 1 fail, 77 skipped (model or Asterisk prompts missing).
"""
import argparse
import os
import sys
import wave

from asr_rows import one_row

SKIP = 77
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "asr_whisper", "tools"))
import make_clips  # noqa: E402  (the prompt transcripts and WAV reader of the data set)

PROMPTS = ["demo-nomatch", "confbridge-has-joined", "confbridge-dec-list-vol-in",
           "tt-somethingwrong", "privacy-to-blacklist-last-caller", "spy-nbs", "is-set-to",
           "call-fwd-unconditional", "vm-next", "agent-loggedoff", "to-call-this-number"]

# (flags, longest repeated span, where the end stop alone ends the output on this clip (x86-64,
# g++ -O3 numerics), whether the rollback must lower the word errors); elsewhere the decoder
# may take another path and the check is skipped.
SETTINGS = [(["--repeat-span-max", "8", "--repeat-advance", "0"], 8, "something is terribly",
             False),
            ([], 32, "no matches for those keywords.", True)]


def write_clip(work):
    """The clip and a one-row manifest; None when the prompts are not installed."""
    sounds = make_clips.sounds_dir_of("en")
    if sounds is None or not os.path.isfile(make_clips.transcripts_of("en")):
        return None
    texts = make_clips.load_transcripts(make_clips.transcripts_of("en"))
    pcm = []
    for name in PROMPTS:
        data, rate = make_clips.read_wav(os.path.join(sounds, name + ".wav"))
        if data is None or rate != 8000 or name not in texts:
            return None
        pcm.append(data)
    data = (b"\0\0" * int(round(make_clips.GAP_S * 8000))).join(pcm)
    os.makedirs(os.path.join(work, "wav"), exist_ok=True)
    with wave.open(os.path.join(work, "wav", "rollback.wav"), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(data)
    manifest = os.path.join(work, "manifest.tsv")
    with open(manifest, "w", encoding="utf-8") as f:
        f.write("clip_id\tsplit\tduration_s\twav\tprompts\treference\n")
        f.write("rollback\tdev\t%.3f\twav/rollback.wav\t%s\t%s\n"
                % (len(data) / 16000, " ".join(PROMPTS), " ".join(texts[n] for n in PROMPTS)))
    return manifest


def run(binary, manifest, flags):
    return one_row(binary, ["--manifest", manifest, "--split", "dev", "--json", "--frames", "all",
                            "--protocol", "streaming", "--policies", "full", "--keep-ratios", "1"]
                   + flags)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--work", default="end_rollback_check")
    args = ap.parse_args()
    manifest = write_clip(args.work)
    if manifest is None:
        print("SKIP: Asterisk prompts not installed (scripts/deps/asr.sh)")
        return SKIP
    failures = []
    for flags, span, held_tail, must_mend in SETTINGS:
        off = run(args.binary, manifest, flags + ["--end-rollbacks", "0"])
        if off is None:
            print("SKIP: Whisper tiny.en not installed (scripts/deps/asr.sh)")
            return SKIP
        if not off["text"].rstrip().endswith(held_tail):
            print("SKIP: with span %d the end stop's output does not end in %r here (other "
                  "numerics): ...%s" % (span, held_tail, off["text"][-60:]))
            return SKIP
        failures += check_setting(span, must_mend, off, run(args.binary, manifest, flags))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


def check_setting(span, must_mend, off, on):
    """The failures of one setting: off with --end-rollbacks 0, on with the default."""
    a, b = off["tokens"], on["tokens"]
    common = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    print("span %d, end stop alone: %d tokens, %d rollbacks, %d word errors: ...%s"
          % (span, len(a), off["rollbacks"], off["word_errors"], off["text"][-60:]))
    print("span %d, with rollback: %d tokens, %d rollbacks, %d word errors, common prefix %d: "
          "...%s" % (span, len(b), on["rollbacks"], on["word_errors"], common, on["text"][-60:]))
    failures = []
    if off["rollbacks"] != 0:
        failures.append("span %d: --end-rollbacks 0 rolled back" % span)
    if not 1 <= on["rollbacks"] <= 4:
        failures.append("span %d: the default rolled back %d times, expected 1 to 4"
                        % (span, on["rollbacks"]))
    if common < len(a) - (2 * span - 1):
        failures.append("span %d: the outputs part after %d of %d tokens; a cut removes at "
                        "most %d" % (span, common, len(a), 2 * span - 1))
    if b == a:
        failures.append("span %d: the rollback left the output as the end stop ends it" % span)
    if must_mend and on["word_errors"] >= off["word_errors"]:
        failures.append("span %d: the rollback did not lower the word errors (%d -> %d)"
                        % (span, off["word_errors"], on["word_errors"]))
    for name, r in (("end stop alone", off), ("with rollback", on)):
        if not r["reached_eot"]:
            failures.append("span %d, %s: no end of text" % (span, name))
        if len(r["text"].split()) > 1.5 * len(r["reference"].split()):
            failures.append("span %d, %s: runaway" % (span, name))
    return failures


if __name__ == "__main__":
    sys.exit(main())
