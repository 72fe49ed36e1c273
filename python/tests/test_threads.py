# SPDX-License-Identifier: Apache-2.0
"""No sequence of calls from several Python threads crashes the interpreter: the calls that
release the GIL (observe, observe_group, plan, plan_to, apply, compact) hold the policy and the
Plan they use for their whole duration. A second thread that would change either meanwhile gets
RuntimeError; readers of one Plan (compact of K and V, its properties) share it.

Each hammer runs in a child interpreter for a bounded time, so a crash fails the test with the
child's signal instead of killing the test run."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import audiokv

HAMMER = textwrap.dedent(
    """
    import sys, threading, time
    import numpy as np
    import audiokv

    SECONDS = float(sys.argv[1])
    rng = np.random.default_rng(0)

    def filled(cells, budget):
        p = audiokv.make_policy("h2o", budget=budget, capacity=cells, recent_size=0)
        p.append(np.arange(cells))
        p.observe(rng.random(cells).astype(np.float32) / cells)
        return p

    small = filled(20_000, 20_000)
    big = filled(60_000, 60_000)
    other = filled(20_000, 20_000)
    plan = small.plan_to(5_000)           # the shared Plan
    kv = rng.standard_normal((20_000, 64)).astype(np.float32)
    conflicts = {"count": 0}
    stop = time.perf_counter() + SECONDS

    def loop(body):
        def run():
            while time.perf_counter() < stop:
                try:
                    body()
                except RuntimeError:
                    conflicts["count"] += 1
                except audiokv.Error:
                    pass  # the plan no longer fits kv or the policy: rejected, nothing touched
        return run

    size = {"n": 1}
    def grow():
        size["n"] = size["n"] % 200_000 + 70_000
        plan.reserve(size["n"])           # reallocates the plan's arrays

    probs = rng.random(20_000).astype(np.float32) / 20_000
    bodies = [
        lambda: audiokv.compact(kv, plan),                    # reads plan without the GIL
        lambda: audiokv.compact(kv[:, :32], plan),            # a second reader of the same plan
        lambda: big.plan_to(rng.integers(1, 60_000), plan),   # refills it (60k cells)
        lambda: small.plan_to(5_000, plan),                   # refills it (20k cells)
        lambda: other.apply(plan),                            # reads it (foreign: rejected)
        grow,
        lambda: (plan.move_to, plan.evict, plan.n_kv_after, repr(plan)),
        lambda: other.observe(probs),
    ]
    threads = [threading.Thread(target=loop(b)) for b in bodies]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(conflicts["count"])
    """
)


def hammer(seconds):
    return subprocess.run([sys.executable, "-c", HAMMER, str(seconds)], capture_output=True, text=True,
                          timeout=120)


def half_plan(cells, rng):
    """An h2o policy holding `cells` cells after one observed step, and its plan to half."""
    policy = audiokv.make_policy("h2o", budget=cells, capacity=cells, recent_size=0)
    policy.append(np.arange(cells))
    policy.observe(rng.random(cells).astype(np.float32) / cells)
    return policy, policy.plan_to(cells // 2)


def test_plan_refilled_while_compacting_never_crashes():
    result = hammer(4.0)
    assert result.returncode == 0, f"child interpreter died (status {result.returncode}): {result.stderr[-2000:]}"
    assert int(result.stdout.split()[-1]) > 0  # the threads really overlapped on the Plan


def test_a_plan_in_use_refuses_a_writer_and_admits_readers():
    """Deterministic form of the hammer: while one thread compacts a large K with a Plan
    (no GIL), refilling or reserving that Plan raises RuntimeError and leaves it intact, and a
    concurrent reader (its properties) succeeds."""
    import threading

    rng = np.random.default_rng(3)
    cells = 40_000
    policy, plan = half_plan(cells, rng)
    move_to = plan.move_to.copy()
    kv = rng.standard_normal((cells, 2048)).astype(np.float16)  # ~160 MB: long enough to overlap
    reference = kv[move_to >= 0].copy()
    done = threading.Event()

    def compacting():
        audiokv.compact(kv, plan)
        done.set()

    other = audiokv.make_policy("h2o", budget=100, capacity=100)
    other.append(np.arange(100))
    refused, read = 0, 0
    thread = threading.Thread(target=compacting)
    thread.start()
    while not done.is_set():
        try:
            other.plan_to(10, plan)
        except RuntimeError as exc:
            assert "Plan" in str(exc)
            refused += 1
        try:
            plan.reserve(10)
        except RuntimeError:
            refused += 1
        assert np.array_equal(plan.move_to, move_to)
        read += 1
    thread.join()
    if refused == 0:
        pytest.skip("the compaction finished before a second call could overlap it")
    assert read > 0
    assert np.array_equal(kv[: cells // 2], reference)
    assert np.array_equal(plan.move_to, move_to)
    policy.apply(plan)
    assert policy.num_cells == cells // 2


def test_a_buffer_cannot_be_released_under_a_running_compact():
    """compact holds the buffer export it writes through for the whole call, so another
    thread's memoryview.release() is refused (BufferError) and the memory stays. (A NumPy
    array cannot be resized meanwhile either: the call's own reference fails resize's
    refcheck.)"""
    import threading

    rng = np.random.default_rng(4)
    cells = 40_000
    policy, plan = half_plan(cells, rng)
    data = bytearray(rng.integers(0, 256, cells * 1024, dtype=np.uint8).tobytes())
    rows = np.frombuffer(bytes(data), dtype=np.uint8).reshape(cells, 1024)
    reference = rows[plan.move_to >= 0].copy()
    view = memoryview(data).cast("B", (cells, 1024))
    done = threading.Event()
    refused = 0

    def compacting():
        audiokv.compact(view, plan)
        done.set()

    thread = threading.Thread(target=compacting)
    thread.start()
    while not done.is_set():
        try:
            view.release()
        except BufferError:
            refused += 1
    thread.join()
    assert len(data) == cells * 1024
    assert np.array_equal(np.frombuffer(bytes(data), dtype=np.uint8).reshape(cells, 1024)[: cells // 2],
                          reference)
    if refused == 0:
        pytest.skip("the compaction finished before a second call could overlap it")
