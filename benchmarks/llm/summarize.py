#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Tables and a plot from benchmarks/results/llm_*.jsonl (benchmarks/llm/run_llm.sh).

Writes benchmarks/results/llm_summary.md and llm_ppl_segments.png. Usage: summarize.py [RESULTS_DIR]
"""
import glob
import json
import math
import os
import re
import sys


def load(path):
    rows = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rows.append(json.loads(line))
    return rows


def fmt(v, digits=2):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "–"
    return f"{v:.{digits}f}"


def policies_in(rows, skip=()):
    """The policies of `rows` in first-seen order, without those in `skip`."""
    seen = []
    for r in rows:
        if r["policy"] not in skip and r["policy"] not in seen:
            seen.append(r["policy"])
    return seen


def labelled(rows):
    """Rows with policy "NAME (tag)" where a run was tagged (two oracle_future horizons)."""
    return [dict(r, policy=f"{r['policy']} ({r['tag']})") if r.get("tag") else r for r in rows]


def ppl_tables(rows, out):
    ok = labelled([r for r in rows if r.get("status") == "ok"])
    full = [r for r in ok if r["policy"] == "full"]
    if not full:
        out.append("(no full-cache run)\n")
        return
    f = full[0]
    out.append(f"Full cache: perplexity {f['ppl']:.3f} over {f['scored']} scored tokens "
               f"({f['tokens']} tokens of {f['text']}, chunks of {f['chunk']}).\n")
    budgets = sorted({r["budget"] for r in ok if r["policy"] != "full"})
    policies = policies_in(ok, skip=("full",))
    out.append("| policy | " + " | ".join(f"{b} cells" for b in budgets) + " |")
    out.append("|---|" + "---|" * len(budgets))
    for p in policies:
        cells = []
        for b in budgets:
            m = [r for r in ok if r["policy"] == p and r["budget"] == b]
            if not m:
                cells.append("–")
                continue
            r = m[0]
            cells.append(f"{r['ppl']:.2f} ({100 * (r['ppl'] / f['ppl'] - 1):+.1f}%, "
                         f"mean {r['mean_cells']:.0f} / max {r['max_cells']})")
        out.append(f"| {p} | " + " | ".join(cells) + " |")
    errors = [r for r in rows if r.get("status") != "ok"]
    for r in errors:
        out.append(f"\nerror row: {r['policy']} {r['budget_spec']}: {r.get('error')}")
    out.append("\nEach cell: perplexity (change against the full cache; mean / max cells held "
               "over the run's decodes).\n")


def dev_table(rows, out, title, note):
    """A dev sweep: one row per (policy, tag), one column per budget."""
    rows = [r for r in rows if r.get("status") == "ok"]
    if not rows:
        return
    out.append(f"## {title}\n")
    out.append(note + "\n")
    budgets = sorted({r["budget"] for r in rows})
    out.append("| run | " + " | ".join(f"{b} cells" for b in budgets) + " |")
    out.append("|---|" + "---|" * len(budgets))
    keys = []
    for r in rows:
        k = (r["policy"], r.get("tag", ""))
        if k not in keys:
            keys.append(k)
    for policy, tag in keys:
        cells = []
        for b in budgets:
            m = [r for r in rows
                 if (r["policy"], r.get("tag", "")) == (policy, tag) and r["budget"] == b]
            cells.append(f"{m[0]['ppl']:.2f} (mean {m[0]['mean_cells']:.0f})" if m else "–")
        label = policy if policy != "audiokv" else f"audiokv, {tag}"
        out.append(f"| {label} | " + " | ".join(cells) + " |")
    out.append("")


def plot_segments(rows, path):
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ok = labelled([r for r in rows if r.get("status") == "ok"])
    budgets = sorted({r["budget"] for r in ok if r["policy"] != "full"})
    full = [r for r in ok if r["policy"] == "full"]
    if not budgets or not full:
        return False
    fig, axes = plt.subplots(1, len(budgets), figsize=(5 * len(budgets), 4), sharey=True)
    if len(budgets) == 1:
        axes = [axes]
    seg = full[0]["segment"]
    names = policies_in(ok, skip=("full",))
    colors = {n: f"C{i % 10}" for i, n in enumerate(names)}
    for ax, b in zip(axes, budgets):
        xs = [seg * (i + 1) for i in range(len(full[0]["segment_nll"]))]
        ax.plot(xs, [math.exp(v) if v is not None else float("nan")
                     for v in full[0]["segment_nll"]], "k-", lw=2, label="full")
        for r in ok:
            if r["budget"] != b or r["policy"] == "full":
                continue
            ax.plot(xs, [math.exp(v) if v is not None else float("nan") for v in r["segment_nll"]],
                    marker=".", color=colors[r["policy"]], label=r["policy"],
                    ls="--" if r["policy"].startswith("oracle_future") else "-")
        ax.axvline(b, color="grey", ls=":", lw=1)
        ax.set_title(f"{b} cells")
        ax.set_xlabel("tokens into the stream")
        ax.set_yscale("log")
    axes[0].set_ylabel(f"perplexity per {seg}-token segment")
    handles = [plt.Line2D([], [], color="k", lw=2, label="full")] + [
        plt.Line2D([], [], color=colors[n], marker=".", label=n,
                   ls="--" if n.startswith("oracle_future") else "-") for n in names]
    axes[0].legend(handles=handles, fontsize=7)
    fig.suptitle("Streaming perplexity in llama.cpp, Qwen2.5-Coder 0.5B Q4_K_M")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def passkey_table(rows, out, title):
    ok = [r for r in rows if r.get("status") == "ok"]
    if not rows:
        out.append(f"({title}: not run)\n")
        return
    depths = sorted({r["depth"] for r in rows})
    policies = policies_in(rows)
    held = [r for r in ok if r["policy"] != "full"]
    spec = held[0]["budget_spec"] if held else "?"
    out.append(f"**{title}** (prompt {rows[0]['tokens']} tokens; budget {spec} = "
               f"{held[0]['budget'] if held else '?'} cells)\n")
    out.append("| policy | " + " | ".join(f"depth {d}%" for d in depths) + " | found |")
    out.append("|---|" + "---|" * (len(depths) + 1))
    for p in policies:
        cells, n, k = [], 0, 0
        for d in depths:
            m = [r for r in rows if r["policy"] == p and r["depth"] == d]
            if not m:
                cells.append("–")
            elif m[0].get("status") != "ok":
                cells.append("error")
            else:
                n += 1
                k += bool(m[0]["found"])
                ans = m[0]["answer"].strip().replace("|", "/")[:16]
                cells.append(("yes" if m[0]["found"] else "no") + f" (`{ans}`)")
        out.append(f"| {p} | " + " | ".join(cells) + f" | {k}/{n} |")
    out.append("")


def cost_table(rows, out):
    ok = [r for r in rows if r.get("status") == "ok"]
    if not ok:
        out.append("(cost: not run)\n")
        return
    out.append("| run | prompt tokens | n_ctx | KV MiB | tokens/s (generation) | decode s/token "
               "| capture | observe | plan | seq_rm | overhead (no capture) |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in ok:
        name = r["policy"] + ("" if r["policy"] == "full" else f" @ {r['budget']}")
        out.append(
            f"| {name} | {r['prompt_tokens']} | {r['n_ctx']} | {r['kv_bytes'] / 2**20:.1f} | "
            f"{fmt(r['tokens_per_s'])} | {fmt(r['step_decode_s'], 4)} | "
            + " | ".join(f"{100 * r[k]:.3f}%" if k in r else "–"
                         for k in ("capture_frac", "observe_frac", "plan_frac", "seq_rm_frac",
                                   "overhead_frac"))
            + " |")
    for r in rows:
        if r.get("status") != "ok":
            out.append(f"\nerror row: {r['policy']} {r['budget_spec']}: {r.get('error')}")
    out.append("\nFractions are of llama_decode's own time per generated token (the capture runs "
               "inside it); overhead = observe + plan + seq_rm.\n")


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "..", "results")
    out = ["# llama.cpp benchmarks (generated by benchmarks/llm/summarize.py)\n",
           "Qwen2.5-Coder 0.5B Instruct Q4_K_M in llama.cpp 0c1e57098 (CPU, one thread, flash "
           "attention off for every run), `benchmarks/llm/run_llm.sh`.\n"]
    dev = load(os.path.join(d, "llm_dev.jsonl"))
    if dev:
        out.append("## Dev: the adapter's scoring (Exodus, 768 tokens, audiokv at 128 cells)\n")
        out.append("| variant | perplexity | mean cells |")
        out.append("|---|---|---|")
        for r in dev:
            if r.get("status") == "ok":
                out.append(f"| {r.get('tag', '')} | {r['ppl']:.3f} | {r['mean_cells']:.0f} |")
        out.append("")
    dev_table(load(os.path.join(d, "llm_dev_text.jsonl")), out,
              "Dev: text frames (Exodus 3-14, 1024 tokens)",
              "The decision for the adapter's `text_frame` (frame_flag_text: the speech rules "
              "leave text to its scores) against treating text tokens as audio frames.")
    dev_table(load(os.path.join(d, "llm_dev_text4k.jsonl")), out,
              "Dev: the text recent window (Exodus 3-14, 4096 tokens)",
              "The decision for `audiokv_config::text_recent_share` (`recent=CELLS` sets the "
              "window of a text-only stream: share x budget); rule in docs/llama_cpp.md.")
    ppl = (load(os.path.join(d, "llm_ppl_ref.jsonl")) + load(os.path.join(d, "llm_ppl.jsonl"))
           + load(os.path.join(d, "llm_ppl_oracle.jsonl")))
    out.append("## Streaming perplexity (Genesis)\n")
    ppl_tables(ppl, out)
    if plot_segments(ppl, os.path.join(d, "llm_ppl_segments.png")):
        out.append("![per-segment perplexity](llm_ppl_segments.png)\n")
    out.append("## Pass-key retrieval\n")
    # run_llm.sh's pass-key suites: 1k prompts (no suffix) to 8k, at 20% and other budgets (_bN).
    budgets = sorted({re.search(r"(_b\d+)\.jsonl$", f).group(1)
                      for f in glob.glob(os.path.join(d, "llm_passkey_*_b*.jsonl"))},
                     key=lambda x: -int(x[2:]))
    for budget in [""] + budgets:
        for size in ("", "2k", "4k", "8k"):
            for mode, title in (("once", "compressed once after prefill, question in the window"),
                                ("stream", "chunked prefill of 64, eviction between chunks, "
                                           "question unseen")):
                rows = load(os.path.join(d, f"llm_passkey_{mode}{size}{budget}.jsonl"))
                if rows or (not size and not budget):
                    passkey_table(rows, out, title)
    out.append("## Cost\n")
    cost_table(load(os.path.join(d, "llm_cost.jsonl")) + load(os.path.join(d, "llm_cost4k.jsonl"))
               + load(os.path.join(d, "llm_stream16k.jsonl")), out)
    with open(os.path.join(d, "llm_summary.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    print("\n".join(out))


if __name__ == "__main__":
    main()
