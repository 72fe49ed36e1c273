# SPDX-License-Identifier: Apache-2.0
"""audiokv: KV-cache eviction policies for speech models (bindings of the C++ headers).

One :class:`Policy` manages one (sequence, layer, KV head) cache. Each decode step::

    policy.append(pos)                      # the engine appended one K/V row
    policy.observe(probs)                   # [num_cells] attention probabilities (float32)
    if policy.wants_eviction():
        plan = policy.plan()                # evict, move_to (NumPy arrays), n_kv_after
        audiokv.compact(k, plan)            # in place, zero-copy (NumPy or torch CPU tensors)
        audiokv.compact(v, plan)
        policy.apply(plan)

Every call validates its arguments before it changes anything: a bad one raises
:class:`Error` (a ``ValueError``) whose ``argument`` names it, one of the wrong type a
``TypeError`` with the same ``argument``, and the state is unchanged. :func:`compact` refuses
read-only buffers. Calls that release the GIL hold their policy and their :class:`Plan` until
they return: another thread that would change either meanwhile gets ``RuntimeError`` (several
threads may read one Plan at once, e.g. compact K and V).
"""

from __future__ import annotations

__all__ = [
    "AudioKVConfig",
    "EntropyHeadBudgets",
    "Error",
    "FRAME_CRITICAL",
    "FRAME_PHONEME_BOUNDARY",
    "FRAME_SEGMENT_START",
    "FRAME_SINK",
    "FRAME_TEXT",
    "Plan",
    "Policy",
    "PoolSplit",
    "PrefetchConfig",
    "compact",
    "lse_scores",
    "make_adakv_heads",
    "make_policy",
    "observe_lse",
    "policy_names",
    "share_layer_plan",
    "__version__",
]


class Error(ValueError):
    """Invalid argument to an audiokv call; ``argument`` names it (e.g. ``"attention[17]"``,
    ``"frames[2].speaker"``, ``"config.trigger"``). The call that raised changed nothing."""

    def __init__(self, message: str, argument: str = "") -> None:
        super().__init__(message)
        self.argument = argument


from . import _ext  # noqa: E402  (Error must exist before the extension registers it)

_ext._set_error_type(Error)

from ._ext import (  # noqa: E402
    EntropyHeadBudgets,
    FRAME_CRITICAL,
    FRAME_PHONEME_BOUNDARY,
    FRAME_SEGMENT_START,
    FRAME_SINK,
    FRAME_TEXT,
    Plan,
    Policy,
    PoolSplit,
    PrefetchConfig,
    compact,
    make_adakv_heads,
    share_layer_plan,
)

__version__ = _ext.version


def lse_scores(q, k, lse, *, base, scale, mode="mean", layout="nhd", seq_lens=None, indptr=None,
               indices=None, last_page_len=None, return_probs=False):
    """Per-cell attention probabilities of one decode step from the log-sum-exp a flash-style
    kernel returned, without recomputing the softmax (C++ ``audiokv::cpu::lse_scores``)::

        p[b, r, j] = exp(scale * q[b, r] . k_b[j, r // G] - lse[b, r])       base="natural"
        p[b, r, j] = 2 ** (scale * log2(e) * q[b, r] . k_b[j, r // G] - lse[b, r])   base="two"

    ``base`` has no default: FlashInfer's FA2-style decode/prefill wrappers return base-2 LSEs
    (``state_t::get_lse``), its cutlass backend natural ones. ``scale`` is the kernel's softmax
    scale (usually ``head_dim ** -0.5``).

    q: [batch, num_q_heads, head_dim] (or [num_q_heads, head_dim]); lse: [batch, num_q_heads];
    float32 CPU arrays (NumPy or torch). K, float32 with unit stride over head_dim:

    * contiguous: [batch, cells, kv_heads, dim] (``layout="nhd"``) or [batch, kv_heads, cells,
      dim] (``"hnd"``, Hugging Face caches), 3-d for one sequence; ``seq_lens`` [batch] cells per
      sequence (default: all);
    * paged (FlashInfer's CSR table): ``indptr`` [batch + 1], ``indices`` [indptr[-1]] page ids,
      ``last_page_len`` [batch]; k is the page pool [pages, page_size, kv_heads, dim] (``"nhd"``)
      or [pages, kv_heads, page_size, dim] (``"hnd"``).

    Returns scores [batch, kv_heads, max_cells] float32: each KV head's probabilities reduced over
    its GQA group (``mode`` "mean" or "max"), cells beyond a sequence's count 0; with
    ``return_probs`` also probs [batch, num_q_heads, max_cells]. Raises :class:`Error` naming the
    bad argument.
    """
    return _ext.lse_scores(q, k, lse, base=base, scale=scale, mode=mode, layout=layout,
                           seq_lens=seq_lens, indptr=indptr, indices=indices,
                           last_page_len=last_page_len, return_probs=return_probs)


def observe_lse(policies, q, k, lse, *, base, scale, mode="mean", layout="nhd", seq_lens=None,
                indptr=None, indices=None, last_page_len=None, mass_tolerance=1e-3):
    """:func:`lse_scores` folded straight into the policies: ``policies[b * num_kv_heads + h]``
    observes KV head h's scores of sequence b. Each policy must hold exactly its sequence's cells.
    With ``mass_tolerance`` >= 0 every query row's probabilities must sum to 1 within it (an LSE of
    the wrong base, scale or cell set is refused instead of skewing the policies; give a negative
    value when K holds only part of what the kernel attended). Either every policy observes or
    none does."""
    _ext.observe_lse(policies, q, k, lse, base=base, scale=scale, mode=mode, layout=layout,
                     seq_lens=seq_lens, indptr=indptr, indices=indices,
                     last_page_len=last_page_len, mass_tolerance=mass_tolerance)



class AudioKVConfig(_ext.AudioKVConfig):
    """Configuration of the ``"audiokv"`` policy (C++ ``audiokv::audiokv_config``), with the
    specification's defaults. Fields by attribute or keyword: ``AudioKVConfig(budget=4096,
    frame_ms=40.0)``; ``lambda_`` is the config's ``lambda``; ``split`` and ``prefetch`` are
    :class:`PoolSplit` and :class:`PrefetchConfig`. ``validate()`` raises :class:`Error`."""

    def __init__(self, **fields) -> None:
        super().__init__()
        for key, value in fields.items():
            if key.startswith("_") or key not in _CONFIG_FIELDS_ALL:
                raise Error(f"audiokv::AudioKVConfig: config.{key}: is not a field", f"config.{key}")
            try:
                setattr(self, key, value)
            except TypeError as exc:
                raise Error(f"audiokv::AudioKVConfig: config.{key} = {value!r}: {exc}", f"config.{key}") from None

    def __setattr__(self, key: str, value) -> None:
        # A misspelt field would otherwise become a new attribute that configures nothing.
        if key not in _CONFIG_FIELDS_ALL:
            raise Error(f"audiokv::AudioKVConfig: config.{key}: is not a field", f"config.{key}")
        try:
            super().__setattr__(key, value)
        except TypeError:
            field = getattr(type(self), key)
            expected = type(field.__get__(self)).__name__ if hasattr(field, "__get__") else "?"
            if expected == "int" and isinstance(value, int) and not isinstance(value, bool):
                raise Error(f"audiokv::AudioKVConfig: config.{key} = {value}: must fit in int32",
                            f"config.{key}") from None
            exc = TypeError(f"audiokv::AudioKVConfig: config.{key} = {type(value).__name__}: must be "
                            f"{'an' if expected[0] in 'aeiou' else 'a'} {expected}"
                            + (" in range" if expected in ("int", "float") else ""))
            exc.argument = f"config.{key}"
            raise exc from None


def policy_names() -> list[str]:
    """Every name :func:`make_policy` accepts."""
    return [n.strip() for n in _ext.policy_names.split(",")]


def make_policy(name: str, **options) -> Policy:
    """A new policy by name (see :func:`policy_names`).

    Options (each policy reads only its own): ``budget``, ``capacity``, ``num_speakers``,
    ``n_sink`` (streaming_llm), ``recent_size`` (h2o), ``lru_tau``, ``lru_tau_per_cell``,
    ``window``, ``kernel``, ``reduce`` ("avg"/"max"; ``pool`` is accepted as the earlier
    spelling), ``group_size`` (snapkv, pyramidkv, adakv),
    ``layer``, ``num_layers``, ``beta`` (pyramidkv), ``tova_force_last``, ``alpha_safeguard``,
    ``seed`` (random). For ``"audiokv"``: ``config=AudioKVConfig(...)`` (or just ``budget``),
    and the smoothing stages' ``block`` (within-block rank), ``level_weight``, ``slope_gain``;
    any :class:`AudioKVConfig` field may also be given by name.
    """
    if isinstance(name, str) and name == "audiokv":
        fields = {key: options.pop(key) for key in list(options) if key in _CONFIG_FIELDS}
        if fields:
            config = options.pop("config", None)
            if config is None:
                config = AudioKVConfig(
                    budget=options.pop("budget", 0),
                    capacity=options.pop("capacity", 0),
                    num_speakers=options.pop("num_speakers", 1),
                )
            elif isinstance(config, _ext.AudioKVConfig):
                config = _copy_config(config)  # the caller's config stays as it was
            else:
                raise Error(f"audiokv::make_policy: options.config = {config!r}: must be an "
                            "audiokv.AudioKVConfig", "options.config")
            for key, value in fields.items():
                try:
                    setattr(config, key, value)
                except TypeError as exc:
                    raise Error(f"audiokv::make_policy: config.{key} = {value!r}: {exc}", f"config.{key}") from None
            options["config"] = config
    return _ext.make_policy(name, **options)


def _copy_config(config: _ext.AudioKVConfig) -> AudioKVConfig:
    """A copy of every field Python can set (the others keep their defaults in any config
    made from Python)."""
    copy = AudioKVConfig()
    for key in _CONFIG_FIELDS_ALL:
        setattr(copy, key, getattr(config, key))
    return copy


_CONFIG_FIELDS_ALL = {
    "budget", "capacity", "split", "trigger", "alpha", "neighbour_prior", "evaluation_share",
    "smooth_text", "text_recent_share", "base_rate", "lambda_", "voice_weight", "boundary_radius",
    "boundary_horizon_ms", "min_retention_ms", "frame_ms", "num_speakers", "baseline_rate",
    "drift_window", "drift_factor", "prior_mode", "prefetch",
}  # fmt: skip
# Fields that make_policy() takes as AudioKVConfig fields (budget, capacity and num_speakers
# are shared with the baselines).
_CONFIG_FIELDS = _CONFIG_FIELDS_ALL - {"budget", "capacity", "num_speakers"}
