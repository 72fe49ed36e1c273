# SPDX-License-Identifier: Apache-2.0
"""Policies through the bindings: every name builds, kept sets against references written
from each policy's definition (NumPy), grouped observation, and the AudioKV configuration."""

import numpy as np
import pytest

import audiokv


def kept_positions(positions, plan):
    """Positions the plan keeps, in slot order (from its move map)."""
    move_to = plan.move_to
    assert len(move_to) == plan.n_kv_before
    return np.asarray(positions)[move_to >= 0]


def dirichlet_rows(rng, n, rows=1):
    p = rng.random((rows, n)).astype(np.float32) + 1e-3
    return (p / p.sum(axis=1, keepdims=True)).astype(np.float32)


def test_every_registered_name_builds_and_runs_a_step():
    names = audiokv.policy_names()
    assert "audiokv" in names and "h2o" in names and len(names) == 13
    rng = np.random.default_rng(0)
    for name in names:
        budget = 64
        policy = audiokv.make_policy(name, budget=budget, window=4)
        assert policy.name == name
        assert policy.budget == budget
        n = policy.capacity
        if name == "knorm":
            policy.append(np.arange(n), key_norms=rng.random(n).astype(np.float32))
        else:
            policy.append(np.arange(n))
        assert policy.num_cells == n
        policy.observe(dirichlet_rows(rng, n)[0])
        assert policy.wants_eviction()
        plan = policy.plan()
        assert plan.n_kv_before == n
        assert 0 < plan.n_kv_after < n
        assert np.array_equal(np.flatnonzero(plan.move_to < 0), plan.evict)
        policy.apply(plan)
        assert policy.num_cells == plan.n_kv_after
        assert policy.num_cells <= budget


def test_fifo_keeps_the_newest_budget_cells():
    policy = audiokv.make_policy("fifo", budget=5)
    rng = np.random.default_rng(1)
    for pos in range(40):
        policy.append(pos * 3)
        policy.observe(dirichlet_rows(rng, policy.num_cells)[0])
        if policy.wants_eviction():
            policy.apply(policy.plan())
    assert policy.positions.tolist() == [3 * p for p in range(35, 40)]


def test_streaming_llm_keeps_sinks_and_the_most_recent():
    policy = audiokv.make_policy("streaming_llm", budget=10, n_sink=4)
    rng = np.random.default_rng(2)
    for pos in range(30):
        policy.append(pos)
        policy.observe(dirichlet_rows(rng, policy.num_cells)[0])
        if policy.wants_eviction():
            policy.apply(policy.plan())
    assert policy.positions.tolist() == [0, 1, 2, 3] + list(range(24, 30))


def test_knorm_plan_to_keeps_the_lowest_key_norms():
    rng = np.random.default_rng(3)
    n, target = 50, 17
    keys = rng.standard_normal((n, 8)).astype(np.float32)
    norms = np.sqrt((keys.astype(np.float64) ** 2).sum(axis=1)).astype(np.float32)
    positions = np.arange(100, 100 + n)
    policy = audiokv.make_policy("knorm", budget=n, capacity=n)
    policy.append(positions, key_norms=norms)
    plan = policy.plan_to(target)
    expected = np.sort(positions[np.argsort(norms, kind="stable")[:target]])
    assert kept_positions(positions, plan).tolist() == expected.tolist()


def test_h2o_stream_matches_a_numpy_reference():
    """H2O: accumulate every attention weight; keep the `recent` newest plus the top
    budget - recent accumulated scores of the older cells (ties: the older cell goes)."""
    budget, recent = 12, 4
    policy = audiokv.make_policy("h2o", budget=budget, recent_size=recent)
    rng = np.random.default_rng(4)
    ref_pos, ref_hh = [], []
    for pos in range(80):
        policy.append(pos)
        ref_pos.append(pos)
        ref_hh.append(0.0)
        row = dirichlet_rows(rng, len(ref_pos))[0]
        policy.observe(row)
        ref_hh = [h + float(a) for h, a in zip(ref_hh, row)]
        if len(ref_pos) > budget:
            older = len(ref_pos) - recent
            order = sorted(range(older), key=lambda j: (ref_hh[j], ref_pos[j]))
            drop = set(order[: len(ref_pos) - budget])
            ref_pos = [p for j, p in enumerate(ref_pos) if j not in drop]
            ref_hh = [h for j, h in enumerate(ref_hh) if j not in drop]
        if policy.wants_eviction():
            policy.apply(policy.plan())
        assert policy.positions.tolist() == ref_pos


def test_observe_group_mean_equals_observe_of_the_row_mean():
    rng = np.random.default_rng(5)
    a = audiokv.make_policy("h2o", budget=10)
    b = audiokv.make_policy("h2o", budget=10)
    for pos in range(40):
        a.append(pos)
        b.append(pos)
        rows = dirichlet_rows(rng, a.num_cells, rows=4)
        a.observe_group(rows)
        b.observe(rows.mean(axis=0, dtype=np.float64).astype(np.float32))
        if a.wants_eviction():
            pa, pb = a.plan(), b.plan()
            assert pa.evict.tolist() == pb.evict.tolist()
            a.apply(pa)
            b.apply(pb)
    assert a.positions.tolist() == b.positions.tolist()


def test_audiokv_config_by_attribute_and_keyword():
    config = audiokv.AudioKVConfig(budget=400, frame_ms=40.0)
    assert config.budget == 400 and config.frame_ms == pytest.approx(40.0)
    config.trigger = 0.75  # exact in float32: ceil(0.75 * 400) = 300
    config.split.base = 0.5
    config.split.buffer = 0.4
    assert config.split.base == pytest.approx(0.5)
    assert config.trigger_cells() == 300
    config.validate()
    policy = audiokv.make_policy("audiokv", config=config)
    assert policy.budget == 400 and policy.capacity == 400
    same = audiokv.make_policy("audiokv", budget=400, frame_ms=40.0, trigger=0.75, block=4)
    assert same.budget == 400
    with pytest.raises(audiokv.Error) as info:
        audiokv.AudioKVConfig(budget=10, no_such_field=1)
    assert info.value.argument == "config.no_such_field"


def test_audiokv_stream_holds_the_budget_and_tiers_are_exposed():
    config = audiokv.AudioKVConfig(budget=200, frame_ms=20.0)
    policy = audiokv.make_policy("audiokv", config=config)
    rng = np.random.default_rng(6)
    peak = 0
    for pos in range(2000):
        policy.append(pos, voice=float(pos % 7 != 0))
        policy.observe(dirichlet_rows(rng, policy.num_cells)[0])
        if policy.wants_eviction():
            plan = policy.plan()
            assert plan.n_kv_after < config.trigger_cells()
            policy.apply(plan)
        peak = max(peak, policy.num_cells)
        tiers = policy.tiers
        assert tiers is not None and len(tiers) == policy.num_cells
    assert peak <= config.trigger_cells() <= 200
    assert set(np.unique(policy.tiers)).issubset({0, 1, 2})


def test_adakv_heads_share_one_layer_budget():
    heads = audiokv.make_adakv_heads(2, budget=8, capacity=20, window=2)
    rng = np.random.default_rng(7)
    for policy in heads:
        policy.append(np.arange(20))
    for policy in heads:
        policy.observe(dirichlet_rows(rng, 20)[0])
    plans = [policy.plan() for policy in heads]
    for policy, plan in zip(heads, plans):
        policy.apply(plan)
    assert sum(p.num_cells for p in heads) == 2 * 8


def test_frame_flags_and_speakers_reach_the_policy():
    policy = audiokv.make_policy("audiokv", budget=100, num_speakers=2)
    policy.append([0, 1, 2], speaker=[0, 1, 1], flags=[audiokv.FRAME_SINK, 0, 0])
    assert policy.tiers.tolist()[0] == 2  # a sink lives in the emergency pool
    with pytest.raises(audiokv.Error) as info:
        policy.append([3], speaker=[2])
    assert info.value.argument == "frames[0].speaker"


def test_type_stubs_ship_with_the_package():
    import pathlib

    package = pathlib.Path(audiokv.__file__).parent
    stub = (package / "_ext.pyi").read_text()
    assert (package / "py.typed").is_file()
    assert "def make_policy(name: str, **options) -> Policy" in stub
    assert "def observe(self, probs:" in stub
