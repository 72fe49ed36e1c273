# SPDX-License-Identifier: Apache-2.0
"""audiokv.share_layer_plan through the bindings: one keep-set for a layer's heads, for K/V
blocks that hold every head of a layer; bad arguments raise naming them and change no plan."""

import numpy as np
import pytest

import audiokv


def heads(name, count=4, cells=120, budget=48, seed=0):
    """`count` policies over the same `cells` frames, each fed its own attention rows."""
    rng = np.random.default_rng(seed)
    if name == "adakv":  # one group: the heads share a layer's budget and a busy flag
        policies = audiokv.make_adakv_heads(count, budget=budget, capacity=4 * budget, window=4)
    else:
        policies = [audiokv.make_policy(name, budget=budget, capacity=4 * budget, window=4)
                    for _ in range(count)]
    for policy in policies:
        policy.append(np.arange(cells), voice=np.ones(cells, np.float32))
        for _ in range(4):
            row = rng.random(cells).astype(np.float32) ** 4 + 1e-4
            policy.observe(row / row.sum())
    return policies


@pytest.mark.parametrize("name,rule",
                         [("audiokv", "max"), ("audiokv", "mean"), ("h2o", "max"), ("adakv", "max")])
def test_the_heads_of_a_layer_keep_one_set(name, rule):
    policies = heads(name)
    plans = [policy.plan_to(48) for policy in policies]
    own = [plan.move_to < 0 for plan in plans]
    assert any(not np.array_equal(own[0], o) for o in own[1:]), "the heads must disagree"
    evicted = audiokv.share_layer_plan(policies, plans, rule)
    shared = plans[0].move_to < 0
    for plan in plans:
        assert np.array_equal(plan.move_to < 0, shared)
        assert plan.n_kv_after == 120 - evicted
    assert evicted == shared.sum() == max(o.sum() for o in own)
    # Only cells some head evicted go.
    assert not np.any(shared & ~np.logical_or.reduce(own))
    for policy, plan in zip(policies, plans):
        policy.apply(plan)
    for policy in policies[1:]:
        assert np.array_equal(policy.positions, policies[0].positions)


def test_bad_arguments_raise_and_change_no_plan():
    policies = heads("audiokv")
    plans = [policy.plan_to(48) for policy in policies]
    before = [plan.move_to.copy() for plan in plans]
    other = heads("audiokv", count=1, cells=100)[0]
    calls = [
        (lambda: audiokv.share_layer_plan(policies, plans[:3]), "len(plans)"),
        (lambda: audiokv.share_layer_plan([], []), "len(plans)"),
        (lambda: audiokv.share_layer_plan(policies, plans, "median"), "rule"),
        (lambda: audiokv.share_layer_plan(policies, plans[:1] + [other.plan_to(48)] + plans[2:]),
         "plans[1].n_kv_before"),
    ]
    for call, argument in calls:
        with pytest.raises(audiokv.Error) as info:
            call()
        assert info.value.argument == argument, str(info.value)
        for plan, move_to in zip(plans, before):
            assert np.array_equal(plan.move_to, move_to)
    with pytest.raises(TypeError) as info:
        audiokv.share_layer_plan([policies[0], "head"], plans[:2])
    assert info.value.argument == "policies[1]"
    with pytest.raises(TypeError) as info:
        audiokv.share_layer_plan(policies[:2], [plans[0], None])
    assert info.value.argument == "plans[1]"
    with pytest.raises(RuntimeError):  # one plan for two heads
        audiokv.share_layer_plan(policies[:2], [plans[0], plans[0]])
    for plan, move_to in zip(plans, before):
        assert np.array_equal(plan.move_to, move_to)
