# SPDX-License-Identifier: Apache-2.0
"""Bad input raises audiokv.Error naming the C++ argument, and leaves the state unchanged:
after every rejected call the policy plans exactly like a twin that never saw the call."""

import threading
import time

import numpy as np
import pytest

import audiokv


def make_pair(name="h2o", budget=8, cells=10):
    """Two identical policies holding `cells` cells and one observed step."""
    rng = np.random.default_rng(11)
    row = rng.random(cells).astype(np.float32)
    pair = []
    for _ in range(2):
        p = audiokv.make_policy(name, budget=budget, capacity=cells + 2)
        p.append(np.arange(cells))
        p.observe(row)
        pair.append(p)
    return pair


def assert_same_state(a, b):
    assert a.num_cells == b.num_cells
    assert a.positions.tolist() == b.positions.tolist()
    pa, pb = a.plan_to(3), b.plan_to(3)
    assert pa.evict.tolist() == pb.evict.tolist()
    assert pa.move_to.tolist() == pb.move_to.tolist()
    # A plan of a's state applies to a; the untouched twin's plan agrees with it.
    a.apply(pa)
    b.apply(pb)
    assert a.positions.tolist() == b.positions.tolist()


def test_error_is_a_value_error_with_the_argument():
    assert issubclass(audiokv.Error, ValueError)
    with pytest.raises(ValueError):
        audiokv.make_policy("h2o", budget=0)
    with pytest.raises(audiokv.Error) as info:
        audiokv.make_policy("h2o", budget=0)
    assert info.value.argument == "config.budget"
    assert "must be >= 1" in str(info.value)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda p: p.observe(np.ones(9, np.float32) / 9), ("num_cells", "attention.size()")),
        (lambda p: p.observe(np.array([0.1] * 5 + [np.nan] + [0.1] * 4, np.float32)), "attention[5]"),
        (lambda p: p.observe(np.array([0.1] * 9 + [-1.0], np.float32)), "attention[9]"),
        (lambda p: p.observe_group(np.ones((2, 10), np.float32), mode="median"), "mode"),
        (lambda p: p.append([5]), "frames[0].pos"),
        (lambda p: p.append([20, 20]), "frames[1].pos"),
        (lambda p: p.append([20, 21, 22]), "count"),
        (lambda p: p.append([20], speaker=[0, 0]), "speaker"),
        (lambda p: p.append([20], speaker=-1), "frames[0].speaker"),
        (lambda p: p.append([20], flags=[300]), "flags[0]"),
        (lambda p: p.append([2**31]), "pos[0]"),
        (lambda p: p.append([20.5]), "pos[0]"),
        (lambda p: p.append([20], voice=[2.0]), "frames[0].voice"),
        (lambda p: p.append([20], key_norms=np.ones(1, np.float32)), "key_norms"),
        (lambda p: p.plan_to(-1), "target_cells"),
    ],
)
def test_bad_call_raises_and_leaves_state_unchanged(call, argument):
    a, b = make_pair()
    with pytest.raises(audiokv.Error) as info:
        call(a)
    expected = argument if isinstance(argument, tuple) else (argument,)
    assert info.value.argument in expected, str(info.value)
    assert_same_state(a, b)


def test_stale_and_foreign_plans_are_rejected_without_change():
    a, b = make_pair()
    plan = a.plan_to(5)
    a.append(10)  # the plan is now stale
    b.append(10)
    with pytest.raises(audiokv.Error) as info:
        a.apply(plan)
    assert info.value.argument.startswith("plan.")
    assert_same_state(a, b)


def test_bad_options_name_the_option():
    with pytest.raises(audiokv.Error) as info:
        audiokv.make_policy("h2o", budget=4, windw=3)
    assert info.value.argument == "options.windw"
    with pytest.raises(audiokv.Error) as info:
        audiokv.make_policy("snapkv", budget=4, pool="median")
    assert info.value.argument == "options.pool"
    with pytest.raises(audiokv.Error) as info:
        audiokv.make_policy("snapkv", budget=4, kernel=4)
    assert info.value.argument == "config.kernel"
    with pytest.raises(audiokv.Error) as info:
        audiokv.make_policy("no_such_policy", budget=4)
    assert info.value.argument == "name"
    with pytest.raises(audiokv.Error) as info:
        audiokv.make_policy("audiokv", budget=100, trigger=1.5)
    assert info.value.argument == "config.trigger"
    with pytest.raises(audiokv.Error) as info:
        audiokv.make_policy("h2o", budget=4, config=audiokv.AudioKVConfig(budget=4))
    assert info.value.argument == "options.config"


def test_config_validate_names_the_field():
    config = audiokv.AudioKVConfig(budget=100)
    config.alpha = 0.0
    with pytest.raises(audiokv.Error) as info:
        config.validate()
    assert info.value.argument == "config.alpha"


def test_heavy_calls_release_the_gil():
    """While a native loop of observe + plan (>= 0.3 s) runs in one thread, the interpreter
    keeps running another: no gap between its iterations approaches the loop's length."""
    policy = audiokv.make_policy("h2o", budget=3000, capacity=4096)
    policy.append(np.arange(4096))
    probs = np.full(4096, 1.0 / 4096, np.float32)
    plan = audiokv.Plan()
    iterations = 20
    while audiokv._ext._native_observe_plan_seconds(policy, probs, plan, iterations) < 0.3:
        iterations *= 2  # until one native call takes at least 0.3 s
    done = []

    def worker():
        done.append(audiokv._ext._native_observe_plan_seconds(policy, probs, plan, iterations))

    thread = threading.Thread(target=worker)
    last = time.perf_counter()
    thread.start()
    largest_gap = 0.0
    while thread.is_alive():
        now = time.perf_counter()
        largest_gap = max(largest_gap, now - last)
        last = now
    thread.join()
    assert done[0] > 0.15  # the native loop really ran that long
    assert largest_gap < 0.4 * done[0]


def test_concurrent_use_of_one_policy_raises_instead_of_racing():
    policy = audiokv.make_policy("h2o", budget=3000, capacity=4096)
    policy.append(np.arange(4096))
    probs = np.full(4096, 1.0 / 4096, np.float32)
    plan = audiokv.Plan()
    started = threading.Event()
    thread = threading.Thread(
        target=lambda: (started.set(), audiokv._ext._native_observe_plan_seconds(policy, probs, plan, 2000))
    )
    thread.start()
    started.wait()
    raised = 0
    while thread.is_alive():
        try:
            policy.observe(probs)
        except RuntimeError:
            raised += 1
    thread.join()
    assert raised > 0


def kv_of(policy):
    return np.arange(policy.num_cells * 4, dtype=np.float32).reshape(policy.num_cells, 4)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda p: p.plan(out=np.zeros(3)), "out"),
        (lambda p: p.plan(np.zeros(3)), "out"),
        (lambda p: p.plan_to(3, out=1), "out"),
        (lambda p: p.plan_to("3"), "target_cells"),
        (lambda p: p.plan_to(None), "target_cells"),
        (lambda p: p.apply(None), "plan"),
        (lambda p: p.apply(np.zeros(3)), "plan"),
        (lambda p: p.observe(None), "probs"),
        (lambda p: p.observe("abc"), "probs"),
        (lambda p: p.observe_group(np.ones((2, 10), np.float32), mode=3), "mode"),
        (lambda p: audiokv.compact(kv_of(p), None), "plan"),
        (lambda p: audiokv.compact(kv_of(p), p.plan_to(3), layout=1), "layout"),
        (lambda p: audiokv.compact(None, p.plan_to(3)), "kv"),
        (lambda p: audiokv.Plan().reserve("8"), "capacity"),
        (lambda p: audiokv.make_policy(None, budget=4), "name"),
        (lambda p: audiokv.make_adakv_heads("2", budget=4), "num_heads"),
    ],
)
def test_wrong_types_raise_type_error_naming_the_argument(call, argument):
    a, b = make_pair()
    with pytest.raises(TypeError) as info:
        call(a)
    assert getattr(info.value, "argument", None) == argument, str(info.value)
    assert argument in str(info.value)
    assert_same_state(a, b)


@pytest.mark.parametrize(
    "call, argument",
    [
        (lambda p: p.plan_to(2**40), "target_cells"),
        (lambda p: p.plan_to(-(2**63)), "target_cells"),
        (lambda p: p.observe(np.ones((2, 10), np.float32) / 10), "probs"),
        (lambda p: p.observe_group(np.ones(10, np.float32) / 10), "probs"),
        (lambda p: audiokv.Plan().reserve(-1), "capacity"),
        (lambda p: audiokv.Plan().reserve(2**31), "capacity"),
        (lambda p: audiokv.make_adakv_heads(2**40, budget=4), "num_heads"),
        (lambda p: p.append(None), "pos"),
        (lambda p: p.append(20, voice=None), "voice"),
    ],
)
def test_out_of_range_and_misshapen_values_raise_error_naming_the_argument(call, argument):
    a, b = make_pair()
    with pytest.raises(audiokv.Error) as info:
        call(a)
    assert info.value.argument == argument, str(info.value)
    assert_same_state(a, b)


def test_rejected_plan_out_keeps_the_policy_and_the_plan():
    """plan(out=...) with a wrong type changes neither; a Plan given as out is refilled."""
    a, b = make_pair()
    plan = a.plan_to(5)
    before = plan.move_to.tolist()
    with pytest.raises(TypeError):
        a.plan(out=[plan])
    assert plan.move_to.tolist() == before
    assert_same_state(a, b)


def test_config_fields_name_themselves_on_a_wrong_type():
    config = audiokv.AudioKVConfig(budget=100)
    with pytest.raises(TypeError) as info:
        config.budget = "x"
    assert info.value.argument == "config.budget"
    with pytest.raises(TypeError) as info:
        config.split = 3
    assert info.value.argument == "config.split"
    with pytest.raises(audiokv.Error) as info:
        config.budget = 2**40
    assert info.value.argument == "config.budget"
    with pytest.raises(audiokv.Error) as info:
        config.budgt = 5  # a misspelt field is not silently added
    assert info.value.argument == "config.budgt"
    assert config.budget == 100
