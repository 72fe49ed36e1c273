#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Two streaming repairs on the built-in clip (Whisper tiny.en), each on where it acts.

End coverage restart (full cache): an output about to end, every frame revealed, while its
alignment peaks stop more than --end-coverage N frames before the last voiced frame is decoded
again from its start over every frame. On the built-in clip the last token's peak lies a few
frames before the last voiced frame, so --end-coverage 1 restarts and a threshold past the clip's
length never does. Checks:
1. --end-coverage 0 (off) and a threshold of 3000 frames: no restart, the same tokens, and an
   end gap (end_gap_frames) between 2 and 3000;
2. --end-coverage 1: one restart, and the output is the offline true model's token for token
   (the restart decodes from the prompt over every frame of the full cache, as offline does);
3. every run reaches end of text;
4. --end-coverage 1 --end-coverage-cut 1: one cut, and the output begins with the text of the
   output without the repair up to its last sentence (the cut removes one sentence, not more).

End-of-text stall rollback (streaming_llm at 10%, where the decoder keeps choosing end of text
while speech arrives): --eot-stall N cuts the output back to its last sentence's start once N
voiced frames arrive over such reveals. Checks:
5. --eot-stall 0 and 100000: no stall rollback, the same tokens, and longest_eot_hold_frames
   equal in both;
6. --eot-stall 1: at least one stall rollback, an output that differs from the one without
   (decoding went on from a cut), and end of text.
Where --eot-stall 1 does not fire (other numerics), checks 5 and 6 are skipped.

usage: stream_repairs_check.py ASR_WHISPER_BINARY
Exit: 0 pass, 1 fail, 77 skipped (Whisper tiny.en not installed).
"""
import sys

from asr_rows import one_row

SKIP = 77


def run(binary, flags, policy="full"):
    """The built-in clip's one row of `policy`; None when the model is missing."""
    return one_row(binary, ["--json", "--frames", "all"] + flags, policy)


def main():
    binary = sys.argv[1]
    offline = run(binary, ["--protocol", "offline"])
    if offline is None:
        print("SKIP: Whisper tiny.en not installed (scripts/deps/asr.sh)")
        return SKIP
    stream = ["--protocol", "streaming", "--end-coverage"]
    off, never, always = (run(binary, stream + [n]) for n in ("0", "3000", "1"))
    for name, r in (("offline", offline), ("off", off), ("3000", never), ("1", always)):
        print("%-8s %3d tokens, %d restarts, end gap %d, %d word errors: %s"
              % (name, len(r["tokens"]), r.get("coverage_restarts", 0),
                 r.get("end_gap_frames", 0), r["word_errors"], r["text"][:60]))
    failures = []
    for name, r in (("off", off), ("3000", never)):
        if r["coverage_restarts"] != 0:
            failures.append("--end-coverage %s restarted %d times" % (name, r["coverage_restarts"]))
        if not 2 <= r["end_gap_frames"] <= 3000:
            failures.append("--end-coverage %s: end gap %d frames, expected 2 to 3000"
                            % (name, r["end_gap_frames"]))
    if never["tokens"] != off["tokens"]:
        failures.append("a threshold no gap reaches changed the output")
    if always["coverage_restarts"] != 1:
        failures.append("--end-coverage 1 restarted %d times, expected once"
                        % always["coverage_restarts"])
    if always["tokens"] != offline["tokens"]:
        failures.append("the restarted output differs from the offline true model's")
    for name, r in (("offline", offline), ("off", off), ("3000", never), ("1", always)):
        if not r["reached_eot"]:
            failures.append("%s: no end of text" % name)
    failures += check_cut(binary, off)
    failures += check_stall(binary)
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


def before_last_sentence(text):
    """`text` up to and including the last '.', '?' or '!' before its final character."""
    ends = [i for i, c in enumerate(text[:-1]) if c in ".?!"]
    return text[:ends[-1] + 1] if ends else ""


def check_cut(binary, off):
    """Check 4: the end coverage repair cutting one sentence."""
    cut = run(binary, ["--protocol", "streaming", "--end-coverage", "1", "--end-coverage-cut", "1"])
    print("cut      %3d tokens, %d cuts, end gap %d: %s"
          % (len(cut["tokens"]), cut["coverage_restarts"], cut["end_gap_frames"], cut["text"][:60]))
    kept = before_last_sentence(off["text"])
    failures = []
    if cut["coverage_restarts"] != 1:
        failures.append("--end-coverage-cut 1 cut %d times, expected once" % cut["coverage_restarts"])
    if not kept or not cut["text"].startswith(kept):
        failures.append("the cut output does not keep the text before the last sentence: %r"
                        % cut["text"][:len(kept) + 20])
    if not cut["reached_eot"]:
        failures.append("cut: no end of text")
    return failures


def check_stall(binary):
    """Checks 5 and 6: the stall rollback where it acts."""
    evict = ["--protocol", "streaming", "--policies", "streaming_llm", "--keep-ratios", "0.1",
             "--eot-stall"]
    off, never, always = (run(binary, evict + [n], "streaming_llm") for n in ("0", "100000", "1"))
    for name, r in (("off", off), ("100000", never), ("1", always)):
        print("stall %-6s %3d tokens, %d stall rollbacks, %d word errors: %s"
              % (name, len(r["tokens"]), r["stall_rollbacks"], r["word_errors"], r["text"][:60]))
    if always["stall_rollbacks"] == 0:
        print("SKIP (stall): --eot-stall 1 does not fire here (other numerics)")
        return []
    failures = []
    for name, r in (("off", off), ("100000", never)):
        if r["stall_rollbacks"] != 0:
            failures.append("--eot-stall %s rolled back %d times" % (name, r["stall_rollbacks"]))
    if never["tokens"] != off["tokens"]:
        failures.append("a stall no clip reaches changed the output")
    if never["longest_eot_hold_frames"] != off["longest_eot_hold_frames"]:
        failures.append("the longest end-of-text hold differs between two runs that decode alike")
    if always["longest_eot_hold_frames"] < 1:
        failures.append("--eot-stall 1 rolled back with no end-of-text hold recorded")
    if always["tokens"] == off["tokens"]:
        failures.append("--eot-stall 1 rolled back but left the output as it was")
    for name, r in (("off", off), ("100000", never), ("1", always)):
        if not r["reached_eot"]:
            failures.append("stall %s: no end of text" % name)
    return failures


if __name__ == "__main__":
    sys.exit(main())
