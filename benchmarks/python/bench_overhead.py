#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Python-call overhead of observe + plan at 4k cells: the same calls timed from Python
(timeit) and from a C++ loop inside the extension (audiokv._ext._native_observe_plan_seconds),
on the same policy object, probabilities and reserved plan. Each figure is the minimum over
`--repeats` interleaved runs of `--iterations` steps; overhead = python / native - 1.

    python benchmarks/python/bench_overhead.py [--cells 4096] [--json out.json]
"""

import argparse
import json
import platform
import timeit

import numpy as np

import audiokv


def build(name, cells):
    if name == "audiokv":
        policy = audiokv.make_policy("audiokv", config=audiokv.AudioKVConfig(budget=cells, frame_ms=20.0))
    else:
        policy = audiokv.make_policy(name, budget=cells - cells // 10, capacity=cells)
    policy.append(np.arange(cells))
    rng = np.random.default_rng(0)
    probs = rng.random(cells).astype(np.float32)
    probs /= probs.sum()
    plan = audiokv.Plan()
    plan.reserve(policy.capacity)
    assert policy.wants_eviction()
    return policy, probs, plan


def measure(name, cells, iterations, repeats, with_plan):
    policy, probs, plan = build(name, cells)
    native = audiokv._ext._native_observe_plan_seconds
    if with_plan:

        def python_loop():
            for _ in range(iterations):
                policy.observe(probs)
                policy.plan(plan)

    else:

        def python_loop():
            for _ in range(iterations):
                policy.observe(probs)

    python_loop()  # warm-up
    native(policy, probs, plan, iterations, with_plan)
    py_best, cpp_best = float("inf"), float("inf")
    for _ in range(repeats):
        py_best = min(py_best, timeit.timeit(python_loop, number=1))
        cpp_best = min(cpp_best, native(policy, probs, plan, iterations, with_plan))
    return {
        "policy": name,
        "cells": cells,
        "calls": "observe+plan" if with_plan else "observe",
        "python_us": 1e6 * py_best / iterations,
        "native_us": 1e6 * cpp_best / iterations,
        "overhead_pct": 100.0 * (py_best / cpp_best - 1.0),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=4096)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--policies", default="audiokv,h2o,snapkv")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rows = []
    for name in args.policies.split(","):
        for with_plan in (True, False):
            rows.append(measure(name, args.cells, args.iterations, args.repeats, with_plan))
    print(f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, audiokv {audiokv.__version__}")
    print(f"{'policy':<10} {'calls':<13} {'cells':>6} {'python us':>10} {'C++ us':>10} {'overhead':>9}")
    for r in rows:
        print(
            f"{r['policy']:<10} {r['calls']:<13} {r['cells']:>6} {r['python_us']:>10.2f} "
            f"{r['native_us']:>10.2f} {r['overhead_pct']:>8.2f}%"
        )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
