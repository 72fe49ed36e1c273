# SPDX-License-Identifier: Apache-2.0
"""Policy.snapshot() / restore() through the bindings: a restored AudioKV cache continues bit
for bit like the original, and a bad snapshot raises naming "snapshot" and changes nothing."""

import numpy as np
import pytest

import audiokv


def probs(rng, n):
    p = rng.random(n).astype(np.float32) + 1e-3
    return (p / p.sum()).astype(np.float32)


def streamed(budget=48, steps=12, seed=0):
    """An AudioKV cache after `steps` chunks of 8 frames, each observed and planned to budget."""
    rng = np.random.default_rng(seed)
    policy = audiokv.make_policy("audiokv", budget=budget, capacity=4 * budget)
    for step in range(steps):
        policy.append(np.arange(8 * step, 8 * step + 8), voice=rng.random(8).astype(np.float32))
        policy.observe(probs(rng, policy.num_cells))
        if policy.num_cells > budget:
            plan = policy.plan_to(budget)
            policy.apply(plan)
    return policy, rng


def test_a_restored_cache_continues_like_the_original():
    original, rng = streamed()
    snap = original.snapshot()
    assert isinstance(snap, bytes) and len(snap) > 48
    copy = audiokv.make_policy("audiokv", budget=48, capacity=192)
    copy.restore(snap)
    assert np.array_equal(copy.positions, original.positions)
    assert np.array_equal(copy.tiers, original.tiers)
    # The same future on both: identical plans at every step (rows from one generator).
    for step in range(12, 24):
        frames = np.arange(8 * step, 8 * step + 8)
        voice = rng.random(8).astype(np.float32)
        row = probs(rng, original.num_cells + 8)
        plans = []
        for policy in (original, copy):
            policy.append(frames, voice=voice)
            policy.observe(row)
            plan = policy.plan_to(48)
            plans.append((plan.evict.copy(), plan.move_to.copy()))
            policy.apply(plan)
        assert np.array_equal(plans[0][0], plans[1][0]), step
        assert np.array_equal(plans[0][1], plans[1][1]), step
    assert np.array_equal(copy.positions, original.positions)
    assert np.array_equal(copy.tiers, original.tiers)
    # Any bytes-like object restores.
    again = audiokv.make_policy("audiokv", budget=48, capacity=192)
    again.restore(memoryview(bytearray(snap)))
    assert np.array_equal(again.positions, streamed()[0].positions)


def test_a_bad_snapshot_raises_and_changes_nothing():
    source, _ = streamed()
    snap = source.snapshot()
    target, _ = streamed(seed=1)
    before = target.snapshot()
    corrupt = bytearray(snap)
    corrupt[len(corrupt) // 2] ^= 0xFF
    other_budget = streamed(budget=40)[0].snapshot()
    for bad in (snap[:-1], bytes(corrupt), b"", other_budget):
        with pytest.raises(audiokv.Error) as info:
            target.restore(bad)
        assert "snapshot" in str(info.value)
        assert target.snapshot() == before
    with pytest.raises(TypeError) as info:
        target.restore(None)
    assert info.value.argument == "data"
    with pytest.raises(TypeError):
        target.restore(123)
    assert target.snapshot() == before


def test_only_audiokv_has_snapshots():
    policy = audiokv.make_policy("h2o", budget=16)
    policy.append(np.arange(8))
    for call in (policy.snapshot, lambda: policy.restore(b"x")):
        with pytest.raises(audiokv.Error) as info:
            call()
        assert "only make_policy('audiokv')" in str(info.value)
    assert policy.num_cells == 8
