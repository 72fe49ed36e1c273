# SPDX-License-Identifier: Apache-2.0
"""audiokv.lse_scores / observe_lse (scores from a flash kernel's log-sum-exp) against a full
softmax in float64, contiguous and FlashInfer-paged K (scattered pages, NaN holes), GQA, both
bases; Policy.plan_evicting (an eviction chosen outside the policy)."""

import numpy as np
import pytest

import audiokv

TOL = 1e-6


def reference(q, k_seq, scale):
    """[hq, n] softmax and natural LSE in float64; k_seq [n, hkv, d]."""
    hq, hkv = q.shape[0], k_seq.shape[1]
    group = hq // hkv
    k_full = np.repeat(k_seq.astype(np.float64), group, axis=1)  # [n, hq, d]
    logits = np.einsum("hd,nhd->hn", q.astype(np.float64), k_full) * scale
    m = logits.max(axis=1, keepdims=True)
    e = np.exp(logits - m)
    lse = (m + np.log(e.sum(axis=1, keepdims=True)))[:, 0]
    return e / e.sum(axis=1, keepdims=True), lse


def make_case(seed, batch=3, hq=8, hkv=2, d=64, cap=33):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.5, 1.5, (batch, hq, d)).astype(np.float32)
    lens = np.array([cap] + list(rng.integers(0, cap + 1, batch - 1)), dtype=np.int32)
    k = np.full((batch, cap, hkv, d), np.nan, np.float32)
    for b in range(batch):
        k[b, : lens[b]] = rng.uniform(-1.5, 1.5, (lens[b], hkv, d))
    return q, k, lens


def lse_of(q, k, lens, scale, base):
    out = np.zeros(q.shape[:2], np.float32)
    probs = np.zeros((q.shape[0], q.shape[1], k.shape[1]))
    for b in range(q.shape[0]):
        if lens[b] == 0:
            continue
        p, lse = reference(q[b], k[b, : lens[b]], scale)
        probs[b, :, : lens[b]] = p
        out[b] = lse / np.log(2.0) if base == "two" else lse
    return out, probs


@pytest.mark.parametrize("base", ["natural", "two"])
@pytest.mark.parametrize("layout", ["nhd", "hnd"])
def test_contiguous_matches_full_softmax(base, layout):
    q, k, lens = make_case(1)
    scale = 64**-0.5
    lse, probs = lse_of(q, k, lens, scale, base)
    kk = k if layout == "nhd" else np.ascontiguousarray(k.transpose(0, 2, 1, 3))
    scores, got = audiokv.lse_scores(q, kk, lse, base=base, scale=scale, layout=layout, seq_lens=lens, return_probs=True)
    for b in range(3):
        n = lens[b]
        assert np.abs(got[b, :, :n] - probs[b, :, :n]).max() < TOL
        assert np.all(got[b, :, n:] == 0)
        want = probs[b, :, :n].reshape(2, 4, n).mean(axis=1)
        assert np.abs(scores[b, :, :n] - want).max() < TOL


@pytest.mark.parametrize("base", ["natural", "two"])
@pytest.mark.parametrize("layout", ["nhd", "hnd"])
@pytest.mark.parametrize("page_size", [1, 4, 7])
def test_paged_with_holes_matches_full_softmax(base, layout, page_size):
    q, k, lens = make_case(2)
    scale = 64**-0.5
    lse, probs = lse_of(q, k, lens, scale, base)
    rng = np.random.default_rng(3)
    pages_of = [int(np.ceil(n / page_size)) for n in lens]
    need = sum(pages_of)
    ids = rng.permutation(2 * need + 1)  # scattered, out of order; the other pages are holes
    indptr = np.concatenate([[0], np.cumsum(pages_of)]).astype(np.int32)
    indices = ids[:need].astype(np.int32)
    last = np.array([n - (p - 1) * page_size if p else 0 for n, p in zip(lens, pages_of)], np.int32)
    pool = np.full((2 * need + 1, page_size, 2, 64), np.nan, np.float32)  # NaN: a read of a hole fails
    for b in range(3):
        for c in range(lens[b]):
            pool[indices[indptr[b] + c // page_size], c % page_size] = k[b, c]
    if layout == "hnd":
        pool = np.ascontiguousarray(pool.transpose(0, 2, 1, 3))
    scores, got = audiokv.lse_scores(
        q, pool, lse, base=base, scale=scale, layout=layout, indptr=indptr, indices=indices,
        last_page_len=last, mode="max", return_probs=True,
    )
    for b in range(3):
        n = lens[b]
        assert np.abs(got[b, :, :n] - probs[b, :, :n]).max() < TOL
        want = probs[b, :, :n].reshape(2, 4, n).max(axis=1)
        assert np.abs(scores[b, :, :n] - want).max() < TOL


def test_torch_cpu_tensors_and_one_sequence():
    torch = pytest.importorskip("torch")
    q, k, lens = make_case(4, batch=1)
    lse, probs = lse_of(q, k, lens, 0.125, "two")
    scores = audiokv.lse_scores(torch.from_numpy(q[0]), torch.from_numpy(k[0]), torch.from_numpy(lse[0]), base="two", scale=0.125)
    assert scores.shape == (1, 2, k.shape[1])
    assert np.abs(scores[0] - probs[0].reshape(2, 4, -1).mean(axis=1)).max() < TOL
    ro = q.copy()
    ro.setflags(write=False)  # inputs are only read
    audiokv.lse_scores(ro, k, lse, base="two", scale=0.125)


@pytest.mark.parametrize(
    "kwargs, argument",
    [
        (dict(base="e"), "base"),
        (dict(mode="sum"), "mode"),
        (dict(layout="nchw"), "layout"),
        (dict(scale=0.0), "scale"),
        (dict(scale=float("nan")), "scale"),
        (dict(seq_lens=np.array([40, 1, 1])), "kv.seq_lens[0]"),
        (dict(seq_lens=np.array([1, 2])), "seq_lens.size"),
        (dict(indices=np.array([0])), "indices"),
    ],
)
def test_bad_arguments_are_named(kwargs, argument):
    q, k, lens = make_case(5)
    lse, _ = lse_of(q, k, lens, 0.125, "natural")
    call = dict(base="natural", scale=0.125, seq_lens=lens)
    call.update(kwargs)
    with pytest.raises(audiokv.Error) as err:
        audiokv.lse_scores(q, k, lse, **call)
    assert err.value.argument == argument


def test_base_has_no_default_and_arrays_must_be_float32():
    q, k, lens = make_case(6)
    lse, _ = lse_of(q, k, lens, 0.125, "natural")
    with pytest.raises(TypeError):
        audiokv.lse_scores(q, k, lse, scale=0.125)  # base is required
    with pytest.raises(audiokv.Error) as err:
        audiokv.lse_scores(q.astype(np.float64), k, lse, base="natural", scale=0.125)
    assert err.value.argument == "q"
    with pytest.raises(audiokv.Error) as err:
        audiokv.lse_scores(q, k[:, :, :, :32], lse, base="natural", scale=0.125)
    assert err.value.argument == "k.shape[-1]"
    bad = lse.copy()
    bad[0, 1] = np.inf
    with pytest.raises(audiokv.Error) as err:
        audiokv.lse_scores(q, k, bad, base="natural", scale=0.125, seq_lens=lens)
    assert err.value.argument == "lse[1]"


def _h2o_heads(n, count):
    heads = []
    for _ in range(count):
        p = audiokv.make_policy("h2o", budget=8, capacity=64, recent_size=2)
        p.append(np.arange(n))
        heads.append(p)
    return heads


def test_observe_lse_equals_observe_group_of_the_softmax():
    q, k, lens = make_case(7, batch=1, cap=30)
    lse, probs = lse_of(q, k, lens, 0.125, "two")
    mine, ref = _h2o_heads(30, 2), _h2o_heads(30, 2)
    for _ in range(3):
        audiokv.observe_lse(mine, q, k, lse, base="two", scale=0.125)
        for h in range(2):
            ref[h].observe_group(np.ascontiguousarray(probs[0, 4 * h : 4 * h + 4].astype(np.float32)))
    for h in range(2):
        assert mine[h].plan_to(8).evict.tolist() == ref[h].plan_to(8).evict.tolist()


def test_observe_lse_refuses_a_wrong_base_and_changes_nothing():
    q, k, lens = make_case(8, batch=2, cap=20)
    lens[1] = 20
    lse, _ = lse_of(q, k, lens, 0.125, "two")
    heads, twins = _h2o_heads(20, 4), _h2o_heads(20, 4)
    with pytest.raises(audiokv.Error) as err:
        audiokv.observe_lse(heads, q, k, lse, base="natural", scale=0.125)
    assert err.value.argument == "lse[0]"
    with pytest.raises(audiokv.Error) as err:
        audiokv.observe_lse(heads[:3], q, k, lse, base="two", scale=0.125)
    assert err.value.argument == "len(policies)"
    with pytest.raises(TypeError) as err:  # as every entry point: a wrong type is a TypeError
        audiokv.observe_lse(heads[:3] + ["h2o"], q, k, lse, base="two", scale=0.125)
    assert err.value.argument == "policies[3]" and "audiokv.Policy" in str(err.value)
    audiokv.observe_lse(heads, q, k, lse, base="two", scale=0.125)
    audiokv.observe_lse(twins, q, k, lse, base="two", scale=0.125)
    for a, b in zip(heads, twins):
        assert a.plan_to(6).evict.tolist() == b.plan_to(6).evict.tolist()


def test_plan_evicting_follows_an_outside_selection():
    for name in audiokv.policy_names():
        if name in ("adakv", "knorm"):
            continue
        extra = {"min_retention_ms": 20.0} if name == "audiokv" else {}
        p = audiokv.make_policy(name, budget=20, capacity=40, **extra)
        p.append(np.arange(10))
        p.observe(np.full(10, 0.1, np.float32))
        mask = np.zeros(10, bool)
        mask[[0, 3, 9]] = True
        plan = p.plan_evicting(mask)
        assert plan.evict.tolist() == [0, 3, 9]
        p.apply(plan)
        assert p.positions.tolist() == [1, 2, 4, 5, 6, 7, 8]
        with pytest.raises(audiokv.Error) as err:
            p.plan_evicting(np.zeros(3, np.uint8))
        assert err.value.argument == "evict_mask.size()"
