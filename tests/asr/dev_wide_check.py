#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks the wider dev split of examples/asr_whisper/tools/make_clips.py (--wide-passes).

Runs the generator with and without --wide-passes P into two directories and checks:
  * manifest.tsv and its WAVs are the same bytes either way (the wide split adds, changes nothing);
  * dev_wide.tsv: make_clips.py's header, unique ids, split "dev" on every row; its first rows are
    the dev clips of manifest.tsv, row for row;
  * no test prompt leaks: every prompt of every wide clip is dev by make_clips' own rule
    (int(sha1(name)[:8], 16) % 100 < 30, recomputed here);
  * within each pass every dev prompt appears at most once, passes 1..P hold other orders than
    pass 0, and every clip lasts 20-29 s (its WAV length, to the millisecond).
Exit: 0 pass, 1 fail, 77 skipped (the sound packages are missing).
"""
import argparse
import filecmp
import hashlib
import os
import subprocess
import sys
import wave

HEADER = ["clip_id", "split", "duration_s", "wav", "prompts", "reference"]


def rows_of(path):
    with open(path, encoding="utf-8") as f:
        lines = [line.rstrip("\n").split("\t") for line in f]
    if lines[0] != HEADER:
        raise AssertionError("%s: header %s" % (path, lines[0]))
    return lines[1:]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("make_clips")
    ap.add_argument("--work", required=True)
    ap.add_argument("--passes", type=int, default=2)
    args = ap.parse_args()
    plain, wide = os.path.join(args.work, "plain"), os.path.join(args.work, "wide")
    for out, extra in ((plain, []), (wide, ["--wide-passes", str(args.passes)])):
        rc = subprocess.run([sys.executable, args.make_clips, "--out", out] + extra).returncode
        if rc == 77:
            return 77
        if rc != 0:
            print("FAIL: make_clips exited %d" % rc)
            return 1
    errors = []
    manifest = rows_of(os.path.join(plain, "manifest.tsv"))
    if not filecmp.cmp(os.path.join(plain, "manifest.tsv"), os.path.join(wide, "manifest.tsv"),
                       shallow=False):
        errors.append("manifest.tsv differs with --wide-passes")
    for r in manifest:
        if not filecmp.cmp(os.path.join(plain, r[3]), os.path.join(wide, r[3]), shallow=False):
            errors.append("%s differs with --wide-passes" % r[3])
    rows = rows_of(os.path.join(wide, "dev_wide.tsv"))
    ids = [r[0] for r in rows]
    if len(set(ids)) != len(ids):
        errors.append("duplicate clip ids in dev_wide.tsv")
    dev = [r for r in manifest if r[1] == "dev"]
    if rows[:len(dev)] != dev:
        errors.append("dev_wide.tsv does not start with manifest.tsv's dev clips")
    passes = {}
    for r in rows:
        if r[1] != "dev":
            errors.append("%s: split %s" % (r[0], r[1]))
        pass_id = r[0].split("_")[0] if r[0].startswith("wdev") else "0"
        passes.setdefault(pass_id, []).append(r[4].split())
        for name in r[4].split():
            if int(hashlib.sha1(name.encode()).hexdigest()[:8], 16) % 100 >= 30:
                errors.append("%s: test prompt %s" % (r[0], name))
        with wave.open(os.path.join(wide, r[3]), "rb") as w:
            seconds = w.getnframes() / w.getframerate()
        if abs(seconds - float(r[2])) > 1e-3 or not 20.0 <= seconds <= 29.0:
            errors.append("%s: %.3f s (manifest %s)" % (r[0], seconds, r[2]))
    if len(passes) != args.passes + 1:
        errors.append("%d passes, expected %d" % (len(passes), args.passes + 1))
    for pass_id, clips in passes.items():
        names = [n for c in clips for n in c]
        if len(set(names)) != len(names):
            errors.append("pass %s repeats a prompt" % pass_id)
        if pass_id != "0" and clips == passes["0"][:len(clips)]:
            errors.append("pass %s has pass 0's order" % pass_id)
    for e in errors[:20]:
        print("FAIL:", e)
    print("dev_wide: %d clips in %d passes, %d errors" % (len(rows), len(passes), len(errors)))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
