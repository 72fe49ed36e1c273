# SPDX-License-Identifier: Apache-2.0
"""audiokv.EntropyHeadBudgets: a layer's budget split over its heads by their attention entropy,
exact totals, the sharp head favoured, each head planned to its share; bad arguments raise
naming them and change nothing."""

import math

import numpy as np
import pytest

import audiokv


def reads(cells_read, cells):
    """Attention spread evenly over the first `cells_read` of `cells` cells."""
    p = np.zeros(cells, np.float32)
    p[:cells_read] = 1.0 / cells_read
    return p


def test_mean_entropy_is_the_log_of_the_cells_read():
    budgets = audiokv.EntropyHeadBudgets(2)
    assert budgets.exponent == -0.5 and budgets.num_heads == 2
    for _ in range(3):
        budgets.observe(0, reads(10, 200))
        budgets.observe(1, reads(100, 200))
    assert budgets.steps(0) == 3 and budgets.all_observed
    assert budgets.mean_entropy() == pytest.approx([math.log(10), math.log(100)], abs=1e-5)


def test_split_is_exact_and_each_head_plans_to_its_share():
    cells, heads = 300, 3
    budgets = audiokv.EntropyHeadBudgets(heads)
    policies = [audiokv.make_policy("audiokv", budget=400) for _ in range(heads)]
    for policy in policies:
        policy.append(np.arange(cells), voice=np.ones(cells, np.float32))
    for h, policy in enumerate(policies):
        row = reads(10 if h == 0 else cells, cells)
        policy.observe(row)
        budgets.observe(h, row)
    shares = budgets.split(heads * 60)
    assert shares.dtype == np.int32 and shares.sum() == heads * 60
    assert shares[0] > 60 and shares[1] == shares[2]
    # w_h = P_h^G: the sharp head's share above the floors follows (10 / 300)^-0.5.
    ratio = (10 / 300) ** -0.5
    assert abs(shares[0] - (1 + 177 * ratio / (ratio + 2))) < 1.0
    for policy, share in zip(policies, shares):
        plan = policy.plan_to(int(share))
        policy.apply(plan)
        assert policy.num_cells == plan.n_kv_after >= share


def test_bad_arguments_name_themselves_and_change_nothing():
    with pytest.raises(audiokv.Error, match="num_heads"):
        audiokv.EntropyHeadBudgets(0)
    with pytest.raises(audiokv.Error, match="exponent"):
        audiokv.EntropyHeadBudgets(2, float("nan"))
    with pytest.raises(TypeError, match="num_heads"):
        audiokv.EntropyHeadBudgets("2")
    budgets = audiokv.EntropyHeadBudgets(2)
    budgets.observe(0, reads(4, 8))
    with pytest.raises(audiokv.Error, match="head"):
        budgets.observe(2, reads(4, 8))
    with pytest.raises(TypeError, match="probs"):
        budgets.observe(1, "not an array")
    with pytest.raises(audiokv.Error, match="probs"):
        budgets.observe(1, np.ones((2, 2), np.float32))
    assert budgets.steps(0) == 1 and budgets.steps(1) == 0 and not budgets.all_observed
    with pytest.raises(audiokv.Error, match="steps"):
        budgets.split(100)
    budgets.observe(1, reads(4, 8))
    with pytest.raises(audiokv.Error, match="total_budget"):
        budgets.split(1)
    with pytest.raises(TypeError, match="layer_budget"):
        budgets.split(1.5)
    budgets.reset()
    assert not budgets.all_observed and budgets.steps(0) == 0
