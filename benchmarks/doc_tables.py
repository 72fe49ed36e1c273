#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes or checks the result tables of README.md and docs/*.md from benchmarks/results.

A table that this script owns sits between two marker comments in a Markdown file:

  <!-- doc_tables: NAME -->
  ...generated text...
  <!-- /doc_tables: NAME -->

NAME is one of the regions below; each is computed from committed result files only (the
quality sweep's .jsonl rows, the CPU benchmarks' Google Benchmark JSON, the memory-feature
summaries), with the same bootstrap (2000 resamples of clips, seed 7) as run_quality.py, so a
new sweep or benchmark run updates every document by `--write`, and no number is typed twice.

  doc_tables.py --write    rewrite every region in README.md and docs/*.md
  doc_tables.py [--check]  exit 1 when a region differs from what the results give (with a
                           diff), when a region is unknown, missing or unused, when a relative
                           link or #anchor of README.md or docs/*.md points nowhere, or when
                           README.md reaches 250 lines

Plain python3 (standard library only); run from anywhere.
"""
import argparse
import contextlib
import difflib
import functools
import glob
import io
import json
import os
import re
import sys

sys.dont_write_bytecode = True  # a check must not write into the source tree
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "benchmarks", "results")
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "quality"))
import run_quality  # noqa: E402  (the sweep's bootstrap and its policy list)
import languages_table  # noqa: E402  (the other-language tables)
import summarize_compaction_modes  # noqa: E402
import summarize_cpu  # noqa: E402

README_MAX_LINES = 250
RATIOS = (0.4, 0.2, 0.1)
SETS = (("Asterisk", ""), ("voices", "_voices"))  # (name, file infix)
# Cost targets of the per-step path (32k cells x 8 KV heads, one thread): (what, target, met?).
OBSERVE_TARGET, GROUP_TARGET, EVICTION_TARGET, ROOFLINE_TARGET, AMORTISED_TARGET = (
    1.5, 2.5, 0.3, 50.0, 2.0)
ROOFLINE_CELLS = 32768
ORACLE = run_quality.ORACLE


# ---- quality sweep -------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def load_sweep(protocol, infix):
    """{(policy, retention): {clip: row}} of quality[_streaming]<infix>.jsonl (test split); error
    rows (runs the library rejected) are left out."""
    name = "quality" + ("_streaming" if protocol == "streaming" else "") + infix + ".jsonl"
    by = {}
    with open(os.path.join(RESULTS, name)) as f:
        for line in f:
            r = json.loads(line)
            if "error" not in r:
                by.setdefault((r["policy"], r["retention"]), {})[r["clip"]] = r
    return by


def corpus_wer(cells, ids):
    """Word errors over reference words of the clips `ids` (run_quality.py's corpus WER)."""
    return sum(cells[c]["word_errors"] for c in ids) / max(1, sum(cells[c]["ref_words"] for c in ids))


def full_run(by):
    return next(v for (p, _), v in by.items() if p == "full")


def point(by, policy, ratio):
    """Corpus dWER points of one policy at one retention against the reference."""
    cells, full = by[(policy, ratio)], full_run(by)
    ids = sorted(cells)
    return 100 * (corpus_wer(cells, ids) - corpus_wer(full, ids))


@functools.lru_cache(maxsize=None)
def delta_of(protocol, infix, policy, ratio):
    """(corpus dWER points against the reference, 95% CI) of one policy at one retention."""
    by = load_sweep(protocol, infix)
    cells, full = by[(policy, ratio)], full_run(by)
    ids = sorted(cells)
    lo, hi = run_quality.bootstrap(ids, lambda s: corpus_wer(cells, s) - corpus_wer(full, s))
    return point(by, policy, ratio), 100 * lo, 100 * hi


@functools.lru_cache(maxsize=None)
def paired_of(protocol, infix, policy, other, ratio):
    """(policy minus other in corpus WER points, 95% CI, clips better, clips worse)."""
    by = load_sweep(protocol, infix)
    a, b = by[(policy, ratio)], by[(other, ratio)]
    ids = sorted(set(a) & set(b))
    lo, hi = run_quality.bootstrap(ids, lambda s: corpus_wer(a, s) - corpus_wer(b, s))
    better = sum(a[c]["word_errors"] < b[c]["word_errors"] for c in ids)
    worse = sum(a[c]["word_errors"] > b[c]["word_errors"] for c in ids)
    return 100 * (corpus_wer(a, ids) - corpus_wer(b, ids)), 100 * lo, 100 * hi, better, worse


def ci(lo, hi):
    return f"({lo:+.2f} to {hi:+.2f})"


def policies_of(by):
    """The sweep's policies (no reference, no ablation), in run_quality.POLICIES order with each
    variant (NAME+suffix) after its base."""
    names = {p for p, _ in by if p != "full" and p not in run_quality.ABLATIONS}
    order = {p: i for i, p in enumerate(run_quality.POLICIES)}
    return sorted(names, key=lambda p: (order.get(p.split("+")[0], len(order)), p))


def quality_table(protocol, repetition_ratio, runaway_ratio=None):
    """Every policy's dWER per set and retention (CI at 40 and 20%), best of a column in bold;
    the repetition rate at repetition_ratio and, given runaway_ratio, the runaways there."""
    sweeps = [load_sweep(protocol, infix) for _, infix in SETS]
    policies = policies_of(sweeps[0])
    cols = [(s, x) for s in range(len(SETS)) for x in RATIOS]
    values = {}
    for p in policies:
        for s, x in cols:
            if (p, x) in sweeps[s]:  # the last retention without its interval
                values[(p, s, x)] = (delta_of(protocol, SETS[s][1], p, x) if x != RATIOS[-1]
                                     else (point(sweeps[s], p, x), None, None))
    # The oracle is a ceiling, not a policy: never the column's best.
    best = {c: min(v[0] for (p, s, x), v in values.items() if (s, x) == c and p != ORACLE)
            for c in cols}
    head = " | ".join(f"{SETS[s][0]} {int(100 * x)}%" for s, x in cols)
    tail = f" repetition at {int(100 * repetition_ratio)}% (A / v) |"
    if runaway_ratio is not None:
        tail += f" runaways at {int(100 * runaway_ratio)}% (A / v) |"
    lines = [f"| policy | {head} |" + tail,
             "|---" * (len(cols) + 2 + (runaway_ratio is not None)) + "|"]
    for p in policies:
        cells = []
        for s, x in cols:
            if (p, s, x) not in values:
                cells.append("—")
                continue
            d, lo, hi = values[(p, s, x)]
            text = f"{d:+.2f}"
            cells.append((f"**{text}**" if p != ORACLE and round(d, 2) == round(best[(s, x)], 2)
                          else text)
                         + (f" {ci(lo, hi)}" if x != RATIOS[-1] else ""))
        reps = []
        for sweep in sweeps:
            rows = sweep.get((p, repetition_ratio), {})
            reps.append(f"{100 * sum(r['repetition'] for r in rows.values()) / len(rows):.1f}%"
                        if rows else "—")
        label = f"{p} (ceiling)" if p == ORACLE else p
        line = f"| {label} | " + " | ".join(cells) + f" | {' / '.join(reps)} |"
        if runaway_ratio is not None:
            counts = [sweep.get((p, runaway_ratio)) for sweep in sweeps]
            line += " " + " / ".join(str(sum(r["runaway"] for r in rows.values())) if rows else "—"
                                     for rows in counts) + " |"
        lines.append(line)
    return "\n".join(lines)


def reference_line(protocol):
    """The reference's WER and the K/V held, from the sweep rows."""
    key = "peak_kv_bytes" if protocol == "streaming" else "steady_kv_bytes"
    parts, kv = [], []
    for (name, infix) in SETS:
        by = load_sweep(protocol, infix)
        full = full_run(by)
        ids = sorted(full)
        lo, hi = run_quality.bootstrap(ids, lambda s: corpus_wer(full, s))
        parts.append(f"{name} {100 * corpus_wer(full, ids):.2f}% (95% CI {100 * lo:.2f}-"
                     f"{100 * hi:.2f}, {len(ids)} clips)")
        mib = lambda rows: sum(r[key] for r in rows.values()) / len(rows) / 2**20  # noqa: E731
        kv.append(f"{name} {mib(full):.2f} MiB for the full cache, "
                  + " / ".join(f"{mib(by[('audiokv', x)]):.2f}" for x in RATIOS)
                  + f" MiB at {' / '.join(str(int(100 * x)) for x in RATIOS)}%")
    what = ("Reference WER (the full cache under the same protocol)" if protocol == "streaming"
            else "Reference WER (the true model: the full cache, all 1500 encoder frames)")
    held = "peak K/V per clip, mean" if protocol == "streaming" else "K/V held after compression, mean"
    return f"{what}: {'; '.join(parts)}. {held[0].upper() + held[1:]}: {'; '.join(kv)}."


def versus_stride_table(protocol, variants):
    """Paired differences from the stride of each AudioKV variant; bold where the interval
    excludes 0; clips better-worse."""
    sweeps = [load_sweep(protocol, infix) for _, infix in SETS]
    head = " | ".join(f"{name} {int(100 * x)}%" for name, _ in SETS for x in RATIOS)
    lines = [f"| minus uniform_stride | {head} |", "|---" * (1 + len(SETS) * len(RATIOS)) + "|"]
    for v in variants:
        cells = []
        for (_, infix), sweep in zip(SETS, sweeps):
            for x in RATIOS:
                if (v, x) not in sweep:
                    cells.append("—")
                    continue
                d, lo, hi, better, worse = paired_of(protocol, infix, v, "uniform_stride", x)
                text = f"{d:+.2f} {ci(lo, hi)}"
                cells.append((f"**{text}**" if lo > 0 or hi < 0 else text) + f"; {better}–{worse}")
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ablation_table(protocol, ratio=0.2):
    lines = [f"| at {int(100 * ratio)}% | " + " | ".join(name for name, _ in SETS) + " |",
             "|---" * (1 + len(SETS)) + "|"]
    for p in ["audiokv"] + list(run_quality.ABLATIONS):
        cells = []
        for _, infix in SETS:
            d, lo, hi = delta_of(protocol, infix, p, ratio)
            cells.append(f"{d:+.2f} {ci(lo, hi)}")
        label = "audiokv (defaults)" if p == "audiokv" else p
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# Engine options the Whisper base tables show beside the defaults, where a sweep has them.
# The layer's one-shot compression with tiered_layer<>'s default split (entropy_head_budgets'
# exponent): what an engine that compresses a layer once gets.
LAYER = "audiokv+he-0.5"
BASE_OPTIONS = [LAYER]


def base_table(protocol):
    """Whisper base: AudioKV, the stride and the oracle per set and retention, the paired AudioKV
    minus stride, and runaways (quality[_streaming]_base.jsonl, ..._voices_base.jsonl). In
    streaming, a line first gives the reference's WER against the offline true model's."""
    sets = (("Asterisk", "_base"), ("voices", "_voices_base"))
    options = [p for p in BASE_OPTIONS
               if all((p, RATIOS[0]) in load_sweep(protocol, infix) for _, infix in sets)]
    policies = ["audiokv"] + options + ["uniform_stride", ORACLE]
    names = ["AudioKV"] + [f"AudioKV{p[len('audiokv'):]}" for p in options]
    lines = ["| test set | kept | " + " | ".join(names) + " | uniform stride | oracle (ceiling) "
             "| AudioKV − stride (95% CI); clips better–worse | runaways (" + " / ".join(names)
             + " / stride / oracle) |",
             "|---" * (7 + len(options)) + "|"]
    if protocol == "streaming":
        gaps = []
        for name, infix in sets:
            full, true = full_run(load_sweep(protocol, infix)), full_run(load_sweep("offline", infix))
            ids = sorted(full)
            a, b = 100 * corpus_wer(full, ids), 100 * corpus_wer(true, ids)
            gaps.append(f"{name} {a:.2f}% against {b:.2f}% ({a - b:+.2f} points, {len(ids)} clips, "
                        f"{sum(r['runaway'] for r in full.values())} runaways)")
        lines[:0] = ["Reference (the full cache under the streaming protocol) against the true model "
                     "(offline): " + "; ".join(gaps) + ".", ""]
    for name, infix in sets:
        by = load_sweep(protocol, infix)
        n = len(full_run(by))
        for x in RATIOS:
            cells = []
            for p in policies:
                d, lo, hi = delta_of(protocol, infix, p, x)
                cells.append(f"{d:+.2f} {ci(lo, hi)}" if x != RATIOS[-1] else f"{d:+.2f}")
            d, lo, hi, better, worse = paired_of(protocol, infix, "audiokv", "uniform_stride", x)
            diff = f"{d:+.2f} {ci(lo, hi)}"
            runaways = " / ".join(str(sum(r["runaway"] for r in by[(p, x)].values()))
                                  for p in policies)
            lines.append(f"| {name} ({n} clips) | {int(100 * x)}% | " + " | ".join(cells) + " | "
                         + (f"**{diff}**" if lo > 0 or hi < 0 else diff)
                         + f"; {better}–{worse} | {runaways} |")
    return "\n".join(lines)


# The baselines a user could deploy: not AudioKV, not the stride, not a ceiling that reads the
# future (an oracle row).
BASELINES = [p for p in run_quality.POLICIES
             if p not in ("audiokv", "uniform_stride") and "oracle" not in p]


def versus_stride(protocol, infix, policy, ratio):
    """policy minus the stride, paired, with its interval; bold where it excludes 0."""
    d, lo, hi, _, _ = paired_of(protocol, infix, policy, "uniform_stride", ratio)
    diff = f"{d:+.2f} {ci(lo, hi)}"
    return f"**{diff}**" if lo > 0 or hi < 0 else diff


def headline_quality():
    lines = ["| protocol, test set | kept | AudioKV | AudioKV layer | uniform stride "
             "| best other baseline | oracle (ceiling) | AudioKV − stride (95% CI) "
             "| AudioKV layer − stride (95% CI) |", "|---" * 9 + "|"]
    for protocol in ("streaming", "offline"):
        for name, infix in SETS:
            by = load_sweep(protocol, infix)
            n = len(full_run(by))
            for x in RATIOS:
                a = point(by, "audiokv", x)
                s = point(by, "uniform_stride", x)
                best = min(BASELINES, key=lambda p: point(by, p, x))
                o = f"{point(by, ORACLE, x):+.2f}" if (ORACLE, x) in by else "not run"
                # Streaming makes room per head, so the layer's heads behave as AudioKV's.
                layer = f"{point(by, LAYER, x):+.2f}" if (LAYER, x) in by else "= AudioKV"
                lines.append(f"| {protocol}, {name} ({n} clips) | {int(100 * x)}% | {a:+.2f} "
                             f"| {layer} | {s:+.2f} | {point(by, best, x):+.2f} {best} | {o} | "
                             + versus_stride(protocol, infix, "audiokv", x) + " | "
                             + (versus_stride(protocol, infix, LAYER, x) if (LAYER, x) in by
                                else "= AudioKV") + " |")
    return "\n".join(lines)


# ---- CPU benchmarks ------------------------------------------------------------------------

def cpu_rows():
    with open(os.path.join(RESULTS, "cpu_micro_amd.json")) as f:
        data = json.load(f)
    return data["context"], summarize_cpu.load_rows(data)


def machine(ctx):
    cpu = ctx.get("lscpu", {})
    name = cpu.get("Model name", ctx.get("cpu_model", "?"))
    return f"{name}, {ctx.get('num_cpus', '?')} vCPU"


def roofline_numbers():
    """The per-step cost ratios at ROOFLINE_CELLS x 8 KV heads from cpu_micro_amd.json."""
    ctx, rows = cpu_rows()
    n = ROOFLINE_CELLS
    attention = summarize_cpu.to_us(rows[f"BM_EigenDecodeAttention/{n}"])
    dram = summarize_cpu.bandwidth(rows, summarize_cpu.DRAM_STREAM)

    def row(name):
        return rows[f"{name}/{n}"]

    def share(name):  # of the attention step
        return summarize_cpu.to_us(row(name)) / attention

    def roofline(name):  # fraction of the memory roofline, %
        return 100 * row(name)["floor_bytes"] / dram * 1e6 / summarize_cpu.to_us(row(name))

    with open(os.path.join(RESULTS, "compaction_modes_amd.json")) as f:
        modes = json.load(f)
    amortised = next(b["amortised_share"] for b in modes["benchmarks"]
                     if b["name"].startswith(f"BM_EvictionCycle/cells:{n}/hole_filling:1"))
    return {
        "ctx": ctx, "attention_us": attention,
        "observe": 100 * share("BM_RooflineObserve"),
        "observe_heads": 100 * share("BM_RooflineObserveHeads"),
        "observe_group": 100 * share("BM_RooflineObserveGroup4"),
        "eviction": share("BM_RooflineEviction"),
        "eviction_us": summarize_cpu.to_us(row("BM_RooflineEviction")),
        "eviction_heads": share("BM_RooflineEvictionLayer"),
        "eviction_heads_us": summarize_cpu.to_us(row("BM_RooflineEvictionLayer")),
        "roofline_observe": roofline("BM_RooflineObserve"),
        "roofline_observe_heads": roofline("BM_RooflineObserveHeads"),
        "amortised": 100 * amortised, "modes_ctx": modes["context"],
    }


def met(ok):
    return "met" if ok else "**not met**"


def cost_line():
    c = roofline_numbers()
    commit = c["ctx"].get("git", {}).get("head", "")[:7] or "?"
    return (f"Cost at {ROOFLINE_CELLS:,} cells × 8 KV heads, one thread, against an Eigen decode "
            f"attention step: {machine(c['ctx'])}, g++ 12 -O3, library {commit} "
            "(`benchmarks/run_cpu.sh`, `compaction_modes_bench`; "
            "[docs/results.md](docs/results.md#cpu-cost)).")


def headline():
    return ("ΔWER in points against the full cache (lower is better): Whisper tiny.en, its "
            "cross-attention K/V kept per (layer, head) at 40/20/10% of the audio frames, "
            "streaming (the primary protocol) and offline (compressed once). *AudioKV*: "
            "tiered_cache<> per head; *AudioKV layer*: tiered_layer<>, whose one-shot compression "
            "splits the layer's budget over its heads by their attention entropy (a stream makes "
            "room per head, as AudioKV). *Best other "
            "baseline*: the lowest of " + ", ".join(BASELINES) + " in that row, picked after the "
            "fact. *Oracle*: keeps what the clip's full-cache run attends most from then on, a "
            "ceiling and not a policy (headroom = stride − oracle). The last two columns are paired over "
            "the same clips; bold where the 95% interval excludes 0.\n\n" + headline_quality() + "\n\n" + cost_line() + "\n\n"
            + roofline_targets())


def captured(function, *args):
    """What function(*args) prints, with an empty line before each table (Markdown needs it)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        function(*args)
    lines = []
    for line in out.getvalue().strip("\n").split("\n"):
        if line.startswith("|") and lines and lines[-1] and not lines[-1].startswith("|"):
            lines.append("")
        lines.append(line)
    return "\n".join(lines)


def cpu_micro():
    ctx, rows = cpu_rows()
    commit = ctx.get("git", {}).get("head", "")[:7] or "?"
    return (f"{machine(ctx)}, {ctx.get('date', '')[:10]}, library {commit}; load "
            f"{ctx.get('load_avg', [float('nan')])[0]:.2f} at the start, "
            f"{ctx.get('load_avg_end', [float('nan')])[0]:.2f} at the end.\n\n"
            + captured(summarize_cpu.micro_table, rows))


def cpu_roofline():
    _, rows = cpu_rows()
    text = captured(summarize_cpu.roofline_table, rows)
    # The phase tables become sub-sections of docs/results.md's CPU section.
    return re.sub(r"^(\d+ cells x 8 KV heads:)", r"#### \1", text, flags=re.M)


def roofline_targets():
    c = roofline_numbers()
    return "\n".join([
        "| target | per head (`observe`, `plan()`) | a layer's heads together "
        "(`observe_heads`, `plan_heads`) |", "|---|---|---|",
        f"| `observe` ≤ {OBSERVE_TARGET}% of the attention step | {c['observe']:.2f}% "
        f"({met(c['observe'] <= OBSERVE_TARGET)}) | {c['observe_heads']:.2f}% |",
        f"| `observe` ≥ {ROOFLINE_TARGET:.0f}% of the memory roofline | {c['roofline_observe']:.0f}% "
        f"({met(c['roofline_observe'] >= ROOFLINE_TARGET)}) | {c['roofline_observe_heads']:.0f}% "
        f"({met(c['roofline_observe_heads'] >= ROOFLINE_TARGET)}) |",
        f"| `observe_group` (G = 4) ≤ {GROUP_TARGET}% | {c['observe_group']:.2f}% "
        f"({met(c['observe_group'] <= GROUP_TARGET)}) | — |",
        f"| eviction before compaction ≤ {EVICTION_TARGET} attention steps | "
        f"{c['eviction']:.3f} ({c['eviction_us'] / 1000:.2f} ms; {met(c['eviction'] <= EVICTION_TARGET)}) "
        f"| {c['eviction_heads']:.3f} ({c['eviction_heads_us'] / 1000:.2f} ms; "
        f"{met(c['eviction_heads'] <= EVICTION_TARGET)}) |",
        f"| eviction with hole-filling compaction ≤ {AMORTISED_TARGET:.0f}% per step, amortised "
        f"| {c['amortised']:.3f}% ({met(c['amortised'] <= AMORTISED_TARGET)}) | — |"])


def compaction(name):
    path = os.path.join(RESULTS, name)
    text = captured(summarize_compaction_modes.main, path)
    first, _, rest = text.partition("\n")
    return f"Run: {first.lstrip('# ')} (`{name}`).\n\n" + rest.lstrip("\n")


# ---- memory features -----------------------------------------------------------------------

def memory_features():
    """The int8 and shared-row rows of memory_features_test.md (run_memory_features.py's
    summary) beside the same retention without the feature."""
    with open(os.path.join(RESULTS, "memory_features_test.md")) as f:
        rows = [[c.strip() for c in line.strip().strip("|").split("|")]
                for line in f if line.startswith("| ") and not line.startswith("| configuration")]
    plain = {r[1]: r for r in rows if "+" not in r[0]}
    lines = ["| configuration | retention | K/V held MiB (without the feature) | saved % "
             "| ΔWER points against no feature (95% CI) | attention error % |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        if "+" not in r[0] or "share0+" in r[0]:
            continue
        lines.append(f"| {r[0]} | {r[1]} | {r[5]} ({plain[r[1]][5]}) | {r[6]} | {r[4]} | {r[7]} |")
    return "\n".join(lines)


def prefetch():
    with open(os.path.join(RESULTS, "prefetch_replay_test.jsonl")) as f:
        records = [json.loads(line) for line in f]
    rows = [r for r in records if r["record"] == "summary"]
    lines = ["| setting | reservation | mean reserved cells (MiB) | peak reserved cells "
             "| misses | allocations inside steps | steps | clips | decisions as static |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        clips = [c for c in records if c["record"] == "clip" and c["label"] == r["label"]
                 and c["mode"] == r["mode"]]
        same = sum(c["same_decisions"] for c in clips)
        setting = ("library defaults" if r["label"] == "defaults" else
                   f"floor {r['min_burst_frames']} frames, granularity {r['granularity']}")
        how = "prefetch" if r["mode"] == "prefetch" else "static (budget + largest burst)"
        lines.append(f"| {setting} | {how} | {r['mean_reserved_cells']:.1f} "
                     f"({r['mean_reserved_mib']:.2f}) | {r['peak_reserved_cells']} | {r['misses']} "
                     f"| {r['step_allocations']} | {r['steps']:,} | {r['clips']} "
                     f"| {same} of {len(clips)} clips |")
    return "\n".join(lines)


def result_rows(name):
    """Every row of benchmarks/results/NAME (.jsonl)."""
    with open(os.path.join(RESULTS, name)) as f:
        return [json.loads(line) for line in f]


REGIONS = {
    "headline": headline,
    "streaming_reference": lambda: reference_line("streaming"),
    "streaming_quality": lambda: quality_table("streaming", 0.1),
    "streaming_vs_stride": lambda: versus_stride_table("streaming", ["audiokv"]),
    "streaming_ablation": lambda: ablation_table("streaming"),
    "offline_reference": lambda: reference_line("offline"),
    "offline_quality": lambda: quality_table("offline", 0.2, 0.1),
    "offline_vs_stride": lambda: versus_stride_table(
        "offline", ["audiokv", "audiokv+merge", "audiokv+merge+hb0.5", LAYER]),
    "offline_ablation": lambda: ablation_table("offline"),
    "base_offline": lambda: base_table("offline"),
    "base_streaming": lambda: base_table("streaming"),
    "memory_features": memory_features,
    "prefetch": prefetch,
    "cpu_micro": cpu_micro,
    "cpu_targets": roofline_targets,
    "cpu_roofline": cpu_roofline,
    "compaction_modes": lambda: compaction("compaction_modes_amd.json"),
    "compaction_paged": lambda: compaction("compaction_modes_paged_amd.json"),
    "languages": lambda: languages_table.tables(
        result_rows("quality_languages.jsonl")).rstrip("\n"),
}
REQUIRED = {"README.md": {"headline"}}
MARKER = re.compile(r"^<!-- doc_tables: ([a-z_]+) -->\n(.*?)^<!-- /doc_tables: \1 -->$",
                    re.M | re.S)
OPEN = re.compile(r"<!-- /?doc_tables: ([^ ]*) -->")


def documents():
    return [os.path.join(ROOT, "README.md")] + sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))


def rewrite(text, path, cache, problems):
    """The text with every region regenerated; unknown or unclosed regions go to problems."""
    rel = os.path.relpath(path, ROOT)
    found = set()

    def fill(match):
        name = match.group(1)
        if name not in REGIONS:
            problems.append(f"{rel}: unknown region '{name}' (known: {', '.join(REGIONS)})")
            return match.group(0)
        found.add(name)
        if name not in cache:
            cache[name] = REGIONS[name]()
        return f"<!-- doc_tables: {name} -->\n{cache[name]}\n<!-- /doc_tables: {name} -->"

    out = MARKER.sub(fill, text)
    if len(OPEN.findall(strip_code(text))) != 2 * len(MARKER.findall(text)):
        problems.append(f"{rel}: a doc_tables marker without its pair")
    for name in REQUIRED.get(rel, ()):
        if name not in found:
            problems.append(f"{rel}: region '{name}' is missing")
    return out, found


# ---- links ---------------------------------------------------------------------------------

def anchors(path):
    """GitHub's anchors of a Markdown file's headings."""
    result = set()
    with open(path) as f:
        text = strip_code(f.read())
    for line in text.splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
            result.add(slug)
    return result


def strip_code(text):
    """Text without fenced code blocks and inline code spans (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    return re.sub(r"`[^`\n]*`", "", text)


def check_links(path, problems):
    rel = os.path.relpath(path, ROOT)
    with open(path) as f:
        text = strip_code(f.read())
    for target in re.findall(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
        if not os.path.exists(dest):
            problems.append(f"{rel}: link to '{target}': no such file")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            problems.append(f"{rel}: link to '{target}': no heading with that anchor")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="rewrite the regions in place")
    group.add_argument("--check", action="store_true", help="(default) compare, links, length")
    args = ap.parse_args()
    problems, cache, used = [], {}, set()
    for path in documents():
        with open(path) as f:
            text = f.read()
        new, found = rewrite(text, path, cache, problems)
        used |= found
        rel = os.path.relpath(path, ROOT)
        if new != text:
            if args.write:
                with open(path, "w") as f:
                    f.write(new)
                print(f"wrote {rel}")
            else:
                diff = difflib.unified_diff(text.splitlines(), new.splitlines(), f"{rel} (committed)",
                                            f"{rel} (from benchmarks/results)", lineterm="", n=1)
                problems.append(f"{rel}: generated tables differ from the results files "
                                "(run benchmarks/doc_tables.py --write):\n" + "\n".join(diff))
        check_links(path, problems)
    for name in sorted(set(REGIONS) - used):
        problems.append(f"region '{name}' appears in no document")
    with open(os.path.join(ROOT, "README.md")) as f:
        lines = f.read().count("\n")
    if lines >= README_MAX_LINES:
        problems.append(f"README.md: {lines} lines; keep it under {README_MAX_LINES} (details go to docs/)")
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print(f"doc_tables: {len(used)} regions match benchmarks/results; links and README length ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
