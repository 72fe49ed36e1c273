# SPDX-License-Identifier: Apache-2.0
"""audiokv.compact moves K/V rows in place, zero-copy: the buffer's address is unchanged and
the kept rows equal a NumPy fancy-index reference."""

import numpy as np
import pytest

import audiokv


def address(a):
    return a.__array_interface__["data"][0]


def planned(cells, target, seed=0):
    rng = np.random.default_rng(seed)
    policy = audiokv.make_policy("h2o", budget=cells, capacity=cells, recent_size=0)
    policy.append(np.arange(cells))
    policy.observe(rng.random(cells).astype(np.float32))
    plan = policy.plan_to(target)
    kept = np.flatnonzero(plan.move_to >= 0)
    assert len(kept) == target
    return policy, plan, kept


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int8, np.float64])
def test_compact_2d_in_place_matches_fancy_index(dtype):
    policy, plan, kept = planned(64, 23)
    rng = np.random.default_rng(1)
    kv = (rng.standard_normal((64, 16)) * 10).astype(dtype)
    reference = kv[kept].copy()
    before = address(kv)
    audiokv.compact(kv, plan)
    assert address(kv) == before
    assert np.array_equal(kv[: plan.n_kv_after], reference)
    policy.apply(plan)
    assert policy.num_cells == 23


def test_compact_one_head_of_nhd_and_all_heads():
    _, plan, kept = planned(40, 10)
    rng = np.random.default_rng(2)
    kv = rng.standard_normal((40, 3, 8)).astype(np.float32)
    original = kv.copy()
    audiokv.compact(kv, plan, head=1)
    assert np.array_equal(kv[:10, 1], original[kept, 1])
    assert np.array_equal(kv[:, [0, 2]], original[:, [0, 2]])  # other heads untouched
    kv = original.copy()
    audiokv.compact(kv, plan)
    assert np.array_equal(kv[:10], original[kept])


def test_compact_hnd_layout_and_strided_views():
    _, plan, kept = planned(30, 12)
    rng = np.random.default_rng(3)
    base = rng.standard_normal((2, 4, 30, 8)).astype(np.float16)  # [batch, heads, cells, dim]
    original = base.copy()
    view = base[1]  # a [heads, cells, dim] view into the batch
    audiokv.compact(view, plan, head=2, layout="hnd")
    assert np.array_equal(base[1, 2, :12], original[1, 2, kept])
    assert np.array_equal(base[0], original[0])
    # Every other column of a wider buffer: not contiguous, still in place.
    wide = rng.standard_normal((30, 16)).astype(np.float32)
    wide_original = wide.copy()
    audiokv.compact(wide[:, ::2], plan)
    assert np.array_equal(wide[:12, ::2], wide_original[kept, ::2])
    assert np.array_equal(wide[:, 1::2], wide_original[:, 1::2])


def test_compact_rejects_bad_arrays_without_touching_them():
    _, plan, _ = planned(20, 5)
    kv = np.arange(20 * 4, dtype=np.float32).reshape(20, 4)
    readonly = kv.copy()
    readonly.setflags(write=False)
    with pytest.raises(audiokv.Error) as info:
        audiokv.compact(readonly, plan)
    assert info.value.argument == "kv"
    short = kv[:10].copy()
    with pytest.raises(audiokv.Error) as info:
        audiokv.compact(short, plan)
    assert info.value.argument == "plan.n_kv_before"
    assert np.array_equal(short, kv[:10])
    with pytest.raises(audiokv.Error) as info:
        audiokv.compact(kv, plan, head=3)
    assert info.value.argument == "head"
    with pytest.raises(audiokv.Error) as info:
        audiokv.compact(kv.reshape(20, 2, 2), plan, layout="nhdd")
    assert info.value.argument == "layout"
    with pytest.raises(audiokv.Error) as info:
        audiokv.compact(kv.ravel(), plan)
    assert info.value.argument == "kv.ndim"
    assert np.array_equal(kv, np.arange(20 * 4, dtype=np.float32).reshape(20, 4))


def test_compact_torch_cpu_tensor_through_dlpack():
    torch = pytest.importorskip("torch")
    _, plan, kept = planned(50, 20)
    kv = torch.randn(1, 2, 50, 8, dtype=torch.bfloat16)  # HF layout [batch, kv_heads, seq, dim]
    original = kv.clone()
    pointer = kv.data_ptr()
    for head in range(2):
        audiokv.compact(kv[0], plan, head=head, layout="hnd")
    assert kv.data_ptr() == pointer
    index = torch.as_tensor(kept)
    assert torch.equal(kv[0, :, :20], original[0][:, index])


def read_only_buffers():
    """Read-only 2-d [20, 4] uint8 views: of an immutable bytes object, of a bytearray through
    a read-only memoryview, and a NumPy array over bytes (np.frombuffer)."""
    data = bytes(range(80))
    mutable = bytearray(range(80))
    return [
        ("memoryview(bytes)", data, memoryview(data).cast("B", (20, 4))),
        ("readonly memoryview(bytearray)", mutable, memoryview(mutable).toreadonly().cast("B", (20, 4))),
        ("np.frombuffer(bytes)", data, np.frombuffer(data, dtype=np.uint8).reshape(20, 4)),
    ]


@pytest.mark.parametrize("index", range(3))
def test_compact_rejects_every_read_only_buffer_before_writing(index):
    _, plan, _ = planned(20, 5)
    label, owner, view = read_only_buffers()[index]
    before = bytes(owner)
    with pytest.raises(audiokv.Error) as info:
        audiokv.compact(view, plan)
    assert info.value.argument == "kv", label
    assert "writable" in str(info.value)
    assert bytes(owner) == before, f"{label}: compact wrote into read-only memory"


def test_compact_accepts_a_writable_memoryview():
    _, plan, kept = planned(20, 5)
    data = bytearray(range(80))
    reference = np.frombuffer(bytes(data), dtype=np.uint8).reshape(20, 4)[kept].copy()
    audiokv.compact(memoryview(data).cast("B", (20, 4)), plan)
    assert np.array_equal(np.frombuffer(bytes(data), dtype=np.uint8).reshape(20, 4)[:5], reference)
