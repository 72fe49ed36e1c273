# SPDX-License-Identifier: Apache-2.0
"""Property test of the Python-facing argument parsing: every binding, called with arguments
drawn from valid values and from junk (None, bools, ints at and past the int32/int64 limits,
NaN/inf, text, bytes, nested and ragged lists, NumPy arrays of every dtype, shape, stride,
byte order and read-only flag, memoryviews, objects of the package's other types), either
succeeds or raises TypeError / audiokv.Error whose ``argument`` names one of the arguments it
was given junk for; after a rejected call the policy plans exactly like a twin that never saw
the call, and a rejected compact, reserve or config assignment changed no byte.

A crash (segfault, abort) ends the interpreter, so the test fails with it. CI runs a bounded,
fixed set of examples per binding (derandomized); AUDIOKV_FUZZ_SECONDS=600 runs every binding
in turn, with new random examples, until that many seconds have passed (see ``fuzz_for``);
AUDIOKV_FUZZ_EXAMPLES sets the examples per binding and round (60)."""

import contextlib
import os
import time

import numpy as np
import pytest

import audiokv

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

EXAMPLES = int(os.environ.get("AUDIOKV_FUZZ_EXAMPLES", "60"))
# The bounded run (CI) draws the same examples every time; the long run new ones each round.
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, database=None,
                    derandomize="AUDIOKV_FUZZ_SECONDS" not in os.environ,
                    suppress_health_check=list(HealthCheck))
RAN = [0]  # examples run (hypothesis may run fewer than max_examples)

CELLS = 10
POLICIES = ["h2o", "audiokv", "snapkv", "knorm", "streaming_llm", "random", "adakv", "tova"]


@contextlib.contextmanager
def memory_bound():
    """A size argument near 2^31 (a capacity, Plan.reserve) asks the library for tens of GB,
    which it allocates and touches up front: under a soft address-space limit of 3 GiB over
    what the process maps now, that is a MemoryError instead of the machine running out."""
    try:
        import resource

        with open("/proc/self/status") as status:
            mapped = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:"))
    except (ImportError, OSError, StopIteration):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped + 3 * 2**30
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.fixture(autouse=True)
def bounded_memory():
    with memory_bound():
        yield


# ---------------------------------------------------------------------------------------------
# Junk

EDGE_INTS = [0, 1, 2, 3, 9, 10, 11, -1, -2, 2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32,
             2**63 - 1, 2**63, -(2**63), 2**64, 10**30, -(10**30)]
DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.object_, "U3", ">f4",
          ">i8", "V4"]


@st.composite
def arrays(draw):
    """A NumPy array of any dtype and 0-3 dimensions (some of size 0), filled from a seeded
    generator with values that include NaN, inf, negatives and the dtype's extremes, optionally
    strided, transposed, made read-only or a memoryview."""
    dtype = np.dtype(draw(st.sampled_from(DTYPES)))
    shape = tuple(draw(st.lists(st.integers(0, 24), max_size=3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    with np.errstate(all="ignore"):  # values past the dtype's range (inf, wrap) are wanted
        return _filled(draw, dtype, shape, rng)


def _filled(draw, dtype, shape, rng):
    size = int(np.prod(shape)) if shape else 1
    if dtype.kind == "f" or dtype.kind == "c":
        values = rng.random(size) * draw(st.sampled_from([1.0, 1e-3, 1e30, -1.0]))
        special = rng.random(size) < 0.1
        values[special] = rng.choice([np.nan, np.inf, -np.inf, -0.5, 0.0], special.sum())
        array = values.astype(dtype)
    elif dtype.kind in "iu":
        info = np.iinfo(dtype)
        array = rng.integers(max(info.min, -50), min(info.max, 50), size, endpoint=True).astype(dtype)
        if size and draw(st.booleans()):
            array[rng.integers(0, size)] = draw(st.sampled_from([info.min, info.max]))
    elif dtype.kind == "b":
        array = rng.random(size) < 0.5
    elif dtype.kind == "O":
        array = np.array([draw(st.sampled_from([None, 1, 0.5, "x", b"y", []]))] * size + [None],
                         dtype=object)[:size]
    else:
        array = np.zeros(size, dtype=dtype)
    array = array.reshape(shape)
    view = draw(st.sampled_from(["plain", "step", "transpose", "readonly", "memoryview"]))
    if view == "step" and array.ndim and array.shape[0] > 1:
        array = array[::2]
    elif view == "transpose":
        array = array.T
    elif view == "readonly":
        array.setflags(write=False)
    elif view == "memoryview" and dtype.kind in "biuf" and dtype.isnative:
        array = memoryview(np.ascontiguousarray(array))
        if draw(st.booleans()):
            array = array.toreadonly()
    return array


@st.composite
def memoryviews(draw):
    """2-d memoryviews of bytes (read-only) or bytearrays (read-only or not)."""
    rows, cols = draw(st.integers(0, 24)), draw(st.sampled_from([1, 2, 4, 8]))
    data = bytes(range(256)) * ((rows * cols) // 256 + 1)
    kind = draw(st.sampled_from(["bytes", "bytearray", "readonly"]))
    buffer = data[: rows * cols] if kind == "bytes" else bytearray(data[: rows * cols])
    view = memoryview(buffer)
    if kind == "readonly":
        view = view.toreadonly()
    return view.cast("B", (rows, cols)) if rows * cols else view


def others():
    """Objects of the package's other types (and a few plain ones), made per example."""
    return st.sampled_from([
        audiokv.Plan, lambda: audiokv.make_policy("h2o", budget=4, capacity=8),
        audiokv.AudioKVConfig, audiokv.PoolSplit, audiokv.PrefetchConfig, object,
        lambda: int, lambda: np.float32, lambda: Ellipsis,
    ]).map(lambda make: make())


scalars = st.one_of(
    st.none(), st.booleans(), st.sampled_from(EDGE_INTS), st.integers(),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6), st.binary(max_size=6),
    st.sampled_from(["mean", "max", "avg", "nhd", "hnd", "add", "multiply", "audiokv", "h2o",
                     "\ud800", ""]),
    st.complex_numbers(allow_nan=True), st.sampled_from([np.int64(5), np.float32(0.5),
                                                         np.uint64(2**64 - 1), np.bool_(True)]),
)
lists = st.recursive(scalars, lambda children: st.lists(children, max_size=5) |
                     st.tuples(children, children), max_leaves=12)
junk = st.one_of(scalars, lists, arrays(), memoryviews(), st.deferred(others),
                 st.dictionaries(st.text(max_size=3), scalars, max_size=2))

# ---------------------------------------------------------------------------------------------
# Fixtures and checks


def make_policy(name):
    if name == "adakv":
        return audiokv.make_adakv_heads(2, budget=CELLS - 2, capacity=CELLS + 4, window=2)[0]
    if name == "audiokv":
        return audiokv.make_policy("audiokv", budget=CELLS - 2, capacity=CELLS + 4, frame_ms=100.0)
    return audiokv.make_policy(name, budget=CELLS - 2, capacity=CELLS + 4, window=2)


def fill(policy, name):
    rng = np.random.default_rng(5)
    if name == "knorm":
        policy.append(np.arange(CELLS), key_norms=rng.random(CELLS).astype(np.float32))
    else:
        policy.append(np.arange(CELLS))
    probs = rng.random(CELLS).astype(np.float32)
    policy.observe(probs / probs.sum())


def twins(name):
    pair = [make_policy(name) for _ in range(2)]
    for p in pair:
        fill(p, name)
    return pair


def state(policy):
    """What a rejected call must not change: cells, positions, and the plan of the state."""
    plan = policy.plan_to(max(0, policy.num_cells - 3))
    return policy.num_cells, policy.positions.tolist(), plan.move_to.tolist(), plan.evict.tolist()


def snapshot(value):
    """Bytes of an array-like argument, to check a rejected call wrote nothing into it."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, memoryview):
        return value.tobytes()
    return None


def same(a, b):
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and (
            a.tobytes() == b.tobytes() if a.dtype != object else True)
    return a == b


def config_state(config):
    """Every field of an AudioKVConfig, the nested PoolSplit and PrefetchConfig by field."""
    out = {}
    for field in sorted(audiokv._CONFIG_FIELDS_ALL):
        value = getattr(config, field)
        if isinstance(value, (audiokv.PoolSplit, audiokv.PrefetchConfig)):
            value = {k: repr(getattr(value, k)) for k in dir(value) if not k.startswith("_")}
        out[field] = repr(value)
    return out


def plan_state(plan):
    return plan.move_to.tolist(), plan.evict.tolist(), plan.n_kv_before, plan.n_kv_after


def names(argument, allowed):
    """Whether `argument` is one of `allowed` or a field or element of one ("probs",
    "probs.shape[0]", "frames[2].pos", "config.trigger")."""
    return any(argument == a or argument.startswith(a + ".") or argument.startswith(a + "[")
               for a in allowed)


def check_rejection(exc, allowed, call):
    """A rejected call raised TypeError or audiokv.Error naming one of `allowed`."""
    if isinstance(exc, MemoryError) and "size" in allowed:
        return  # the caller asked for that much memory (Plan.reserve, a policy's capacity)
    assert isinstance(exc, (TypeError, audiokv.Error)), f"{call}: {type(exc).__name__}: {exc}"
    argument = getattr(exc, "argument", None)
    assert isinstance(argument, str) and names(argument, allowed), (
        f"{call}: {type(exc).__name__} names {argument!r}, expected one of {sorted(allowed)}: {exc}")


# Each binding's parameters: the valid value (from the policy) and the argument names that
# junk in that parameter may be reported as (the Python name and the C++ names behind it).
APPEND_NAMES = {
    "pos": {"pos", "frames", "count"},
    "speaker": {"speaker", "frames"},
    "voice": {"voice", "frames"},
    "flags": {"flags", "frames"},
    "prior": {"prior", "frames"},
    "key_norms": {"key_norms"},
}


def run_policy_call(name, call, args, junk_names):
    """Calls `call(policy, **args)` on one of two twins; on rejection, checks the error and
    that the policy and every array argument are unchanged."""
    a, b = twins(name)
    before = {k: snapshot(v) for k, v in args.items()}
    try:
        with np.errstate(all="ignore"):  # float64 junk past float32's range converts to inf
            call(a, **args)
    except BaseException as exc:  # noqa: BLE001 - every kind is checked
        check_rejection(exc, junk_names, f"{name}.{call.__name__}({args!r})")
        assert state(a) == state(b), f"{name}.{call.__name__}({args!r}) changed the policy"
        for k, v in args.items():
            if before[k] is not None:
                assert same(snapshot(v), before[k]), f"{call.__name__} wrote into {k}"


def pick(draw, valid, names_by_param):
    """Each parameter valid or junk (at least one junk); returns (args, allowed names)."""
    params = list(names_by_param)
    junk_params = draw(st.sets(st.sampled_from(params), min_size=1))
    args, allowed = {}, set()
    for param in params:
        if param in junk_params:
            args[param] = draw(junk)
            allowed |= names_by_param[param]
        elif param in valid:
            args[param] = valid[param]
    return args, allowed


# ---------------------------------------------------------------------------------------------
# The properties, one per binding


def append(policy, **kw):
    policy.append(**kw)


def observe(policy, probs):
    policy.observe(probs)


def observe_group(policy, **kw):
    policy.observe_group(**kw)


def plan(policy, out):
    policy.plan(out=out)


def plan_to(policy, **kw):
    policy.plan_to(**kw)


def apply(policy, plan):
    policy.apply(plan)


@SETTINGS
@given(st.sampled_from(POLICIES), st.data())
def test_append(name, data):
    RAN[0] += 1
    valid = {"pos": CELLS}  # the next position after the twins' 0 .. CELLS - 1
    args, allowed = pick(data.draw, valid, APPEND_NAMES)
    if "pos" not in args:
        args["pos"] = CELLS
    run_policy_call(name, append, args, allowed)


@SETTINGS
@given(st.sampled_from(POLICIES), junk)
def test_observe(name, probs):
    RAN[0] += 1
    run_policy_call(name, observe, {"probs": probs}, {"probs", "attention", "num_cells"})


@SETTINGS
@given(st.sampled_from(POLICIES), st.data())
def test_observe_group(name, data):
    RAN[0] += 1
    valid = {"probs": np.full((2, CELLS), 1.0 / CELLS, np.float32), "mode": "mean"}
    args, allowed = pick(data.draw, valid, {"probs": {"probs", "attention", "num_cells", "group", "group_size"},
                                            "mode": {"mode"}})
    args.setdefault("probs", valid["probs"])
    run_policy_call(name, observe_group, args, allowed | {"policy"})


@SETTINGS
@given(st.sampled_from(POLICIES), junk)
def test_plan_out(name, out):
    RAN[0] += 1
    run_policy_call(name, plan, {"out": out}, {"out"})


@SETTINGS
@given(st.sampled_from(POLICIES), st.data())
def test_plan_to(name, data):
    RAN[0] += 1
    valid = {"target": 4, "out": audiokv.Plan()}
    args, allowed = pick(data.draw, valid, {"target": {"target_cells"}, "out": {"out"}})
    args.setdefault("target", 4)
    run_policy_call(name, plan_to, args, allowed)


def plan_evicting(policy, **kw):
    policy.plan_evicting(**kw)


@SETTINGS
@given(st.sampled_from(POLICIES), st.data())
def test_plan_evicting(name, data):
    RAN[0] += 1
    valid = {"evict_mask": np.arange(CELLS) % 3 == 0, "out": audiokv.Plan()}
    args, allowed = pick(data.draw, valid, {"evict_mask": {"evict_mask"}, "out": {"out"}})
    args.setdefault("evict_mask", valid["evict_mask"])
    run_policy_call(name, plan_evicting, args, allowed)


@SETTINGS
@given(st.sampled_from(POLICIES), junk)
def test_apply(name, plan_arg):
    RAN[0] += 1
    run_policy_call(name, apply, {"plan": plan_arg}, {"plan"})


@SETTINGS
@given(st.sampled_from(POLICIES), st.data())
def test_compact(name, data):
    RAN[0] += 1
    a, _ = twins(name)
    plan_ = a.plan_to(4)
    rng = np.random.default_rng(1)
    valid = {"kv": rng.standard_normal((CELLS, 2, 4)).astype(np.float32), "plan": plan_,
             "head": None, "layout": "nhd"}
    draw = data.draw
    args, allowed = pick(draw, valid, {"kv": {"kv", "plan.n_kv_before"}, "plan": {"plan"},
                                       "head": {"head"},
                                       # another layout moves the cell axis: kv and the plan
                                       # then disagree on the cells
                                       "layout": {"layout", "plan.n_kv_before"}})
    if "kv" not in args:
        args["kv"] = valid["kv"]
    if "plan" not in args:
        args["plan"] = plan_
    before = {k: snapshot(v) for k, v in args.items()}
    planned = plan_state(plan_)
    try:
        audiokv.compact(**args)
    except BaseException as exc:  # noqa: BLE001
        check_rejection(exc, allowed, f"compact({args!r})")
        for k, v in args.items():
            if before[k] is not None:
                assert same(snapshot(v), before[k]), f"a rejected compact wrote into {k}"
    assert plan_state(plan_) == planned  # compaction only reads the plan


OPTION_KEYS = ["budget", "capacity", "num_speakers", "n_sink", "recent_size", "lru_tau",
               "lru_tau_per_cell", "window", "kernel", "reduce", "pool", "group_size", "layer",
               "num_layers", "beta", "tova_force_last", "alpha_safeguard", "seed", "config",
               "block", "level_weight", "slope_gain", "trigger", "alpha", "split", "prefetch",
               "prior_mode", "lambda_", "frame_ms", "no_such_option"]


@SETTINGS
@given(st.sampled_from(POLICIES + ["no_such_policy"]), st.data())
def test_make_policy(name, data):
    RAN[0] += 1
    draw = data.draw
    allowed = set()
    if name == "no_such_policy" or draw(st.booleans()):
        name = draw(junk) if name != "no_such_policy" else name
        allowed.add("name")
    options = {"budget": 6, "capacity": 12}
    if isinstance(name, str) and name == "audiokv":
        options["frame_ms"] = 100.0  # a recent window that fits the small budget
    for key in draw(st.sets(st.sampled_from(OPTION_KEYS), max_size=3)):
        options[key] = draw(junk)
        # Option values are checked by the policy's own validation (config.*); a large
        # budget or capacity may exhaust memory (MemoryError).
        allowed |= {"options", "config", "size"}
    config = options.get("config")
    before = config_state(config) if isinstance(config, audiokv.AudioKVConfig) else None
    try:
        audiokv.make_policy(name, **options)
    except BaseException as exc:  # noqa: BLE001
        check_rejection(exc, allowed, f"make_policy({name!r}, **{options!r})")
    if before is not None:
        assert before == config_state(config), (
            "make_policy changed the caller's config")


@SETTINGS
@given(junk)
def test_make_adakv_heads(num_heads):
    RAN[0] += 1
    try:
        audiokv.make_adakv_heads(num_heads, budget=4, capacity=8)
    except BaseException as exc:  # noqa: BLE001
        check_rejection(exc, {"num_heads", "config.num_heads", "size"},
                        f"make_adakv_heads({num_heads!r})")


@SETTINGS
@given(junk)
def test_plan_reserve(capacity):
    RAN[0] += 1
    p, _ = twins("h2o")
    plan_ = p.plan_to(4)
    planned = plan_state(plan_)
    try:
        plan_.reserve(capacity)
    except BaseException as exc:  # noqa: BLE001
        check_rejection(exc, {"capacity", "size"}, f"Plan.reserve({capacity!r})")
    assert plan_state(plan_) == planned


CONFIG_FIELDS = sorted(audiokv._CONFIG_FIELDS_ALL) + ["no_such_field"]


@SETTINGS
@given(st.sampled_from(CONFIG_FIELDS), junk)
def test_config_fields(field, value):
    RAN[0] += 1
    config = audiokv.AudioKVConfig(budget=100)
    before = config_state(config)
    try:
        setattr(config, field, value)
    except BaseException as exc:  # noqa: BLE001
        check_rejection(exc, {f"config.{field}"}, f"config.{field} = {value!r}")
        assert before == config_state(config)
    else:
        try:
            config.validate()
        except BaseException as exc:  # noqa: BLE001
            check_rejection(exc, {"config"}, f"validate() after config.{field} = {value!r}")
    try:
        audiokv.AudioKVConfig(**{field: value})
    except BaseException as exc:  # noqa: BLE001
        check_rejection(exc, {f"config.{field}"}, f"AudioKVConfig({field}={value!r})")


PROPERTIES = [test_append, test_observe, test_observe_group, test_plan_out, test_plan_to,
              test_plan_evicting, test_apply, test_compact, test_make_policy, test_make_adakv_heads, test_plan_reserve,
              test_config_fields]


def fuzz_for(seconds):
    """Runs every property in turn, each time with new random examples, for `seconds`;
    returns the number of examples run."""
    stop, start = time.monotonic() + seconds, RAN[0]
    with memory_bound():
        while time.monotonic() < stop:
            for prop in PROPERTIES:
                prop()
    return RAN[0] - start


@pytest.mark.skipif("AUDIOKV_FUZZ_SECONDS" not in os.environ,
                    reason="long run: AUDIOKV_FUZZ_SECONDS=600")
def test_fuzz_for_a_while():
    examples = fuzz_for(float(os.environ["AUDIOKV_FUZZ_SECONDS"]))
    print(f"\nfuzzed {examples} examples over {len(PROPERTIES)} bindings")
