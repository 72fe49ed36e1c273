# SPDX-License-Identifier: Apache-2.0
"""An audiokv policy as a kvpress press (tested with kvpress 0.5.5, transformers 5.2, torch 2.x).

:class:`AudioKVPress` is a kvpress ``ScorerPress`` whose scores come from one audiokv policy per
(layer, batch row, KV head) that lives across calls. Alone it compresses the prompt; as the
``base_press`` of kvpress's ``DecodingPress`` it compresses during decoding; inside
``AdaKVPress``, ``ComposedPress``, ``PerLayerCompressionPress`` or ``CriticalKVPress`` the
wrapper decides what to keep from the press's scores::

    from kvpress import DecodingPress
    from audiokv.kvpress import AudioKVPress

    press = DecodingPress(base_press=AudioKVPress(policy="audiokv", budget=256),
                          compression_interval=16, target_size=256)
    with press(model):   # a text LLM, Qwen2-Audio, Voxtral, ...
        ...  # prefill and decode; each layer holds at most target_size + interval cells

**Three hooks per decoder layer.** Entering any press that contains an AudioKVPress (``with
press(model)``) attaches, before kvpress's own hook:

1. *observe* (a forward hook on the layer's self-attention, run before any kvpress hook): the
   cells the forward appended are appended to the policies (positions from ``position_ids``;
   frames marked as speech when the model's input token is its audio placeholder, below), and
   each query row of the forward is observed, H2O's rule for a prompt: row t sees the cells up to
   its own. The probabilities are the model's own attention weights when the layer returns them
   (eager attention), else recomputed from the queries (RoPE from the layer's
   ``position_embeddings``) against the cached keys;
2. kvpress's hook (the wrapper's): calls :meth:`AudioKVPress.score`, which is **pure** (each
   policy's ``plan_to(n_kept)``, a const call; nothing changes), or :meth:`AudioKVPress.compress`
   (score, top-k, gather: kvpress's ScorerPress rule), then writes the cache;
3. *follow* (a forward hook on the decoder layer, run after its self-attention and every hook on
   it): the policies follow what the cache now holds, whoever chose it. Rows are identified by
   their key vectors (a gather copies them bit for bit); rows kvpress masks per head
   (``module.masked_key_indices``: AdaKV, CriticalAdaKV) count as evicted for that head. Cells no
   longer held are dropped with ``Policy.plan_evicting``, so each policy holds exactly the cells
   its (layer, row, head) cache holds, after every forward.

**Speech LLMs.** kvpress 0.5.5's ``BasePress.__call__`` looks for the decoder at
``model.model.language_model`` or ``model.model``; Qwen2-Audio and Voxtral (transformers) keep it
at ``model.language_model.model`` and have no ``model.model``, so it raises AttributeError. On
import this module patches ``kvpress.presses.base_press.BasePress.__call__`` (see
:data:`PATCHED`): the patched call finds the decoder at ``model.model.language_model``,
``model.model``, ``model.language_model.model`` or ``model.language_model`` (:func:`find_decoder`),
exposes it to kvpress's unchanged code as ``model.model`` for the duration of the context (an
instance attribute, not a registered submodule: parameters and state dict are untouched), and
attaches the hooks above. Hooks go on the decoder's self-attention layers only, never on the
audio encoder's. The audio span: when the model's config has an audio placeholder id
(``audio_token_id`` / ``audio_token_index``, or the press's ``audio_token_id``), the cells of
input tokens equal to it are appended with ``voice=1`` and the first cell of each audio span with
``FRAME_SEGMENT_START`` (the speech rules of the "audiokv" policy: VAD weighting, segment starts in
the emergency pool); the other cells get ``voice=0``. Without a placeholder id every cell has
``voice=1`` (no speech/text distinction).

Limits: no padding inside a batch (every cell is a real token of its row); no sliding-window
layers; no QuantizedCache; ``adakv`` is refused as the policy (wrap the press in kvpress's
AdaKVPress instead); a cache that grows beyond a policy's capacity between compressions raises
:class:`audiokv.Error`.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np
import torch
from kvpress.presses.base_press import BasePress
from kvpress.presses.scorer_press import ScorerPress
from kvpress.utils import compute_n_kept, get_prerope_query_states
from torch import nn
from transformers import QuantizedCache

import audiokv

#: The kvpress release this module was written and tested against.
KVPRESS_TESTED_VERSION = "0.5.5"


# -- finding the decoder ---------------------------------------------------------------------


def find_decoder(model: nn.Module) -> nn.Module:
    """The module that holds the decoder layers (``.layers``) of a causal or speech LLM:
    ``model.model.language_model``, ``model.model``, ``model.language_model.model`` or
    ``model.language_model``, the first that has ``layers``.

    Raises :class:`audiokv.Error` naming ``model`` when none does.
    """
    inner = getattr(model, "model", None)
    language_model = getattr(model, "language_model", None)
    candidates = (
        getattr(inner, "language_model", None),
        inner,
        getattr(language_model, "model", None),
        language_model,
    )
    for candidate in candidates:
        if isinstance(candidate, nn.Module) and isinstance(getattr(candidate, "layers", None), nn.ModuleList):
            return candidate
    raise audiokv.Error(
        f"audiokv.kvpress: model = {type(model).__name__}: no decoder layers at model.model.layers, "
        "model.model.language_model.layers, model.language_model.model.layers or "
        "model.language_model.layers",
        "model",
    )


def _presses_in(press, seen=None):
    """Every AudioKVPress reachable from `press` through its attributes (wrappers keep their inner
    presses as `press`, `base_press` or a `presses` list)."""
    seen = set() if seen is None else seen
    if id(press) in seen:
        return
    seen.add(id(press))
    if isinstance(press, AudioKVPress):
        yield press
    for value in list(vars(press).values()):
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            if isinstance(item, BasePress):
                yield from _presses_in(item, seen)


@contextlib.contextmanager
def _decoder_as_model_model(model: nn.Module, decoder: nn.Module):
    """Makes `model.model` resolve to `decoder` where the model has no `model` attribute: an
    instance attribute set with object.__setattr__ (so nn.Module registers no submodule), removed
    on exit."""
    if isinstance(getattr(model, "model", None), nn.Module):
        yield
        return
    object.__setattr__(model, "model", decoder)
    try:
        yield
    finally:
        model.__dict__.pop("model", None)


_UPSTREAM_CALL = BasePress.__call__


@contextlib.contextmanager
def _call(self, model):
    decoder = find_decoder(model)
    with contextlib.ExitStack() as stack:
        attached = []
        for press in _presses_in(self):
            if press not in attached:
                stack.enter_context(press._attached(model, decoder))
                attached.append(press)
        stack.enter_context(_decoder_as_model_model(model, decoder))
        stack.enter_context(_UPSTREAM_CALL(self, model))
        yield


#: True once kvpress's ``BasePress.__call__`` is replaced by the speech-LLM-aware call above
#: (done on import; every press class that does not override ``__call__``, and DecodingPress
#: through ``super()``, goes through it).
PATCHED = False


def _patch_kvpress() -> None:
    global PATCHED
    if not PATCHED:
        BasePress.__call__ = _call
        PATCHED = True


# -- the press -------------------------------------------------------------------------------


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@dataclass
class _LayerState:
    policies: list  # [batch][kv_head] audiokv.Policy
    rows: list  # [batch][kv_head] np.ndarray: cache row of each policy slot, slots in time order
    keys: torch.Tensor | None = None  # the cache's keys the rows refer to
    cache: object = None  # the transformers Cache of the sequence
    note: tuple | None = None  # (keys our compress() wrote, its gather indices [batch, head, n])


def _row_matches(now: torch.Tensor, before: torch.Tensor) -> np.ndarray:
    """For each row of `now` [batch, heads, n, dim], the index of the bit-identical row of
    `before` [batch, heads, m, dim] in the same (batch, head), or -1. Equal rows are matched in
    order."""
    b, h, n, d = now.shape
    out = np.full((b, h, n), -1, dtype=np.int64)
    now_bytes = now.detach().to("cpu").contiguous().view(torch.uint8).reshape(b, h, n, -1).numpy()
    before_bytes = before.detach().to("cpu").contiguous().view(torch.uint8).reshape(b, h, before.shape[2], -1).numpy()
    for i in range(b):
        for j in range(h):
            index: dict[bytes, list[int]] = {}
            for r in range(before.shape[2] - 1, -1, -1):
                index.setdefault(before_bytes[i, j, r].tobytes(), []).append(r)
            for r in range(n):
                candidates = index.get(now_bytes[i, j, r].tobytes())
                if candidates:
                    out[i, j, r] = candidates.pop()
    return out


@dataclass
class AudioKVPress(ScorerPress):
    """kvpress press backed by audiokv policies (see the module documentation). Give the
    fields by keyword: kvpress's ``compression_ratio`` is the first positional field.

    Parameters
    ----------
    policy : str
        A name from :func:`audiokv.policy_names` (not ``"adakv"``).
    budget : int
        The policies' budget B (>= 1; h2o's default recent window is B / 2). With DecodingPress,
        its target_size.
    capacity : int
        Slots of each policy; 0: twice the larger of the cache length when the policy is made
        (the prompt) and the budget.
    options : dict
        Further :func:`audiokv.make_policy` options (``recent_size``, ``window``, ``config``,
        ...). ``group_size`` is set from the model for snapkv and pyramidkv.
    audio_token_id : int
        The model's audio placeholder token; -1: the model config's ``audio_token_id`` or
        ``audio_token_index`` when it has one (Qwen2-Audio, Voxtral), else none.
    compression_ratio : float
        kvpress's ratio; DecodingPress sets it for each compression.
    """

    policy: str = "audiokv"
    budget: int = 0
    capacity: int = 0
    options: dict = field(default_factory=dict)
    audio_token_id: int = -1
    compression_ratio: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if self.policy not in audiokv.policy_names() or self.policy == "adakv":
            raise audiokv.Error(
                f"audiokv.kvpress: policy = {self.policy!r}: must be a registered name other than adakv",
                "policy",
            )
        if self.budget < 1:
            raise audiokv.Error(
                f"audiokv.kvpress: budget = {self.budget}: must be >= 1 (the policies' budget; with "
                "DecodingPress, its target_size)",
                "budget",
            )
        if self.capacity < 0:
            raise audiokv.Error(f"audiokv.kvpress: capacity = {self.capacity}: must be >= 0", "capacity")
        self._layers: dict[int, _LayerState] = {}
        self._input_ids: torch.Tensor | None = None
        self._audio_id: int | None = None

    # -- state -------------------------------------------------------------------------------

    def post_init_from_model(self, model):
        """Called by kvpress when the press is entered (``with press(model)``): a new sequence."""
        self.reset()
        self._audio_id = self._audio_token_of(model)

    def reset(self) -> None:
        """Forgets every policy (the next forward starts a new sequence)."""
        self._layers = {}
        self._input_ids = None

    def layer_policies(self, layer_idx: int) -> list:
        """``[batch][kv_head]`` audiokv policies of one layer (empty before its first forward)."""
        state = self._layers.get(layer_idx)
        return [] if state is None else state.policies

    def kept_positions(self, layer_idx: int, batch: int, head: int) -> np.ndarray:
        """Positions of the cells the (layer, batch row, KV head) cache holds, in time order."""
        return self._layers[layer_idx].policies[batch][head].positions

    def kept_rows(self, layer_idx: int, batch: int, head: int) -> np.ndarray:
        """Cache row of each kept cell, in time order (rows masked by kvpress are not kept)."""
        return self._layers[layer_idx].rows[batch][head].copy()

    def _audio_token_of(self, model) -> int | None:
        if self.audio_token_id >= 0:
            return self.audio_token_id
        config = getattr(model, "config", None)
        for name in ("audio_token_id", "audio_token_index"):
            value = getattr(config, name, None)
            if isinstance(value, int) and value >= 0:
                return value
        return None

    def _new_state(self, batch: int, heads: int, group: int, length: int) -> _LayerState:
        capacity = self.capacity or 2 * max(length, self.budget)
        options = dict(self.options)
        if self.policy in ("snapkv", "pyramidkv"):
            options.setdefault("group_size", group)
        config = options.get("config")
        if config is not None:
            # A copy per layer with the press's budget and capacity where the config has none.
            copy = audiokv.AudioKVConfig()
            for name in audiokv._CONFIG_FIELDS_ALL:
                setattr(copy, name, getattr(config, name))
            copy.budget = copy.budget or self.budget
            copy.capacity = copy.capacity or max(capacity, copy.budget)
            options["config"] = copy
        else:
            options.setdefault("budget", self.budget)
            options.setdefault("capacity", capacity)
        policies = [[audiokv.make_policy(self.policy, **options) for _ in range(heads)] for _ in range(batch)]
        rows = [[np.zeros(0, dtype=np.int64) for _ in range(heads)] for _ in range(batch)]
        return _LayerState(policies, rows)

    # -- hooks -------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _attached(self, model: nn.Module, decoder: nn.Module):
        """Registers the input, observe and follow hooks (see the module documentation)."""
        self.reset()  # not every wrapper forwards post_init_from_model (PerLayerCompressionPress)
        self._audio_id = self._audio_token_of(model)
        handles = [model.register_forward_pre_hook(self._input_hook, with_kwargs=True)]
        try:
            for layer in decoder.layers:
                attention = layer.self_attn
                if getattr(attention, "is_sliding", False):
                    continue  # kvpress compresses no sliding-window layer either (Gemma3)
                if getattr(attention, "sliding_window", None) is not None:
                    raise audiokv.Error(
                        f"audiokv.kvpress: layer {attention.layer_idx} uses sliding-window attention, "
                        "which AudioKVPress does not support",
                        "model",
                    )
                handles.append(attention.register_forward_hook(self._observe_hook, with_kwargs=True))
                handles.append(layer.register_forward_hook(self._follow_hook(attention), with_kwargs=True))
            yield
        finally:
            for handle in handles:
                handle.remove()

    def _input_hook(self, module, args, kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        self._input_ids = ids.detach().to("cpu") if isinstance(ids, torch.Tensor) else None

    def _frames(self, batch: int, q_len: int) -> tuple[np.ndarray, np.ndarray]:
        """voice [batch, q_len] and flags [batch, q_len] of the forward's new cells."""
        ids = self._input_ids
        if self._audio_id is None or ids is None or tuple(ids.shape) != (batch, q_len):
            return np.ones((batch, q_len), np.float32), np.zeros((batch, q_len), np.uint8)
        audio = (ids == self._audio_id).numpy()
        starts = audio & ~np.concatenate([np.zeros((batch, 1), bool), audio[:, :-1]], axis=1)
        flags = np.where(starts, audiokv.FRAME_SEGMENT_START, 0).astype(np.uint8)
        return audio.astype(np.float32), flags

    def _observe_hook(self, module, args, kwargs, output):
        hidden_states = kwargs["hidden_states"]
        cache = kwargs["past_key_values"]
        layer = module.layer_idx
        if isinstance(cache, QuantizedCache):
            raise audiokv.Error("audiokv.kvpress: a QuantizedCache is not supported (cells are matched by their keys)", "cache")
        keys = cache.layers[layer].keys  # [batch, kv_heads, length, dim]
        batch, kv_heads, length, head_dim = keys.shape
        q_len = hidden_states.shape[1]
        previous = length - q_len
        group = module.config.num_attention_heads // kv_heads

        position_ids = kwargs.get("position_ids")
        if position_ids is None:
            position_ids = kwargs["cache_position"].unsqueeze(0)
        positions = position_ids.to("cpu").long().expand(batch, q_len).numpy()

        state = self._layers.get(layer)
        if state is None or previous == 0 or len(state.policies) != batch:
            state = self._new_state(batch, kv_heads, group, length)
            self._layers[layer] = state
            if previous > 0:
                # First sight of a cache that already holds cells: assume the uncompressed
                # history right before the forward's positions (it was not observed).
                for b in range(batch):
                    old = np.arange(positions[b, 0] - previous, positions[b, 0])
                    for h in range(kv_heads):
                        self._append(state, b, h, old, np.ones(previous, np.float32), np.zeros(previous, np.uint8), keys, 0)
        state.keys = keys
        state.cache = cache
        state.note = None

        weights = output[1] if isinstance(output, tuple) and len(output) > 1 else None
        if weights is not None:
            probs = weights.detach().to("cpu", torch.float64)  # [batch, heads, q_len, length]
        else:
            probs = self._recomputed(module, hidden_states, keys, kwargs, previous)
        voice, flags = self._frames(batch, q_len)
        for b in range(batch):
            for h in range(kv_heads):
                rows_b = probs[b, h * group : (h + 1) * group]  # [group, q_len, length]
                for t in range(q_len):
                    self._append(state, b, h, positions[b, t : t + 1], voice[b, t : t + 1], flags[b, t : t + 1], keys, previous + t)
                    step = rows_b[:, t, state.rows[b][h]].numpy().astype(np.float32)
                    state.policies[b][h].observe_group(np.ascontiguousarray(step))

    def _append(self, state, b, h, pos, voice, flags, keys, first_row):
        policy = state.policies[b][h]
        n = len(pos)
        if policy.num_cells + n > policy.capacity:
            raise audiokv.Error(
                f"audiokv.kvpress: the cache of (layer, row {b}, head {h}) grew to {policy.num_cells + n} "
                f"cells, beyond the policy's capacity {policy.capacity}: give the press a larger capacity",
                "capacity",
            )
        norms = None
        if self.policy == "knorm":
            norms = keys[b, h, first_row : first_row + n].detach().to("cpu", torch.float32).norm(dim=-1).numpy()
        policy.append(pos, voice=voice, flags=flags, key_norms=norms)
        state.rows[b][h] = np.concatenate([state.rows[b][h], np.arange(first_row, first_row + n)])

    @staticmethod
    def _recomputed(module, hidden_states, keys, kwargs, previous) -> torch.Tensor:
        """[batch, heads, q_len, length] attention of the forward's queries: causal over the
        forward's own cells, every earlier cell visible."""
        batch, kv_heads, length, head_dim = keys.shape
        queries = get_prerope_query_states(module, hidden_states)  # [batch, heads, q_len, dim]
        cos, sin = kwargs["position_embeddings"]
        queries = queries * cos.unsqueeze(1) + _rotate_half(queries) * sin.unsqueeze(1)
        group = queries.shape[1] // kv_heads
        keys_full = keys.repeat_interleave(group, dim=1)
        scaling = getattr(module, "scaling", head_dim**-0.5)
        logits = torch.matmul(queries.double(), keys_full.double().transpose(2, 3)) * scaling
        q_len = queries.shape[2]
        visible = torch.arange(length)[None, :] <= (previous + torch.arange(q_len))[:, None]
        logits = logits.to("cpu").masked_fill(~visible, float("-inf"))
        return torch.softmax(logits, dim=-1)

    def _follow_hook(self, attention: nn.Module):
        def hook(layer_module, args, kwargs, output):
            self._follow(attention)

        return hook

    def _follow(self, attention: nn.Module) -> None:
        state = self._layers.get(attention.layer_idx)
        if state is None or state.cache is None:
            return
        now = state.cache.layers[attention.layer_idx].keys
        masked = getattr(attention, "masked_key_indices", None)
        if now is state.keys and masked is None:
            return
        batch, kv_heads, length, _ = now.shape
        if now is state.keys:
            before_of_now = np.broadcast_to(np.arange(length), (batch, kv_heads, length)).copy()
        elif state.note is not None and state.note[0] is now:
            before_of_now = state.note[1]
        else:
            before_of_now = _row_matches(now, state.keys)
        if masked is not None:
            b_idx, h_idx, r_idx = (m.detach().to("cpu").numpy() for m in masked)
            before_of_now[b_idx, h_idx, r_idx] = -1
        for b in range(batch):
            for h in range(kv_heads):
                rows = state.rows[b][h]
                slot_of_row = {int(r): s for s, r in enumerate(rows)}
                new_row = np.full(len(rows), -1, dtype=np.int64)
                for i, r in enumerate(before_of_now[b, h]):
                    s = slot_of_row.get(int(r))
                    if s is not None:
                        new_row[s] = i
                kept = new_row >= 0
                if not kept.all():
                    policy = state.policies[b][h]
                    policy.apply(policy.plan_evicting((~kept).astype(np.uint8)))
                state.rows[b][h] = new_row[kept]
        state.keys = now
        state.note = None

    # -- kvpress -----------------------------------------------------------------------------

    def score(
        self,
        module: nn.Module,
        hidden_states: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        attentions: torch.Tensor,
        kwargs: dict,
    ) -> torch.Tensor:
        """Pure: each (batch row, KV head) policy's ``plan_to(n_kept)`` (a const call) as scores,
        ``length - new slot`` for the cells it keeps (a top-k returns them in time order), -1 for
        those it evicts, -2 for rows it does not hold (masked or foreign). Nothing changes."""
        state = self._layers.get(module.layer_idx)
        if state is None:
            raise audiokv.Error(
                f"audiokv.kvpress: layer {module.layer_idx} has no observed cells: enter the press "
                "(or the press that wraps it) with `with press(model):` after importing audiokv.kvpress",
                "module",
            )
        batch, kv_heads, length, _ = keys.shape
        n_kept = compute_n_kept(length, self.compression_ratio)
        if keys is state.keys:
            slot_rows = state.rows
        else:
            # Another press of a ComposedPress pruned first: find our cells among its rows.
            before = _row_matches(keys, state.keys)
            slot_rows = []
            for b in range(batch):
                per_head = []
                for h in range(kv_heads):
                    where = {int(r): i for i, r in enumerate(before[b, h]) if r >= 0}
                    per_head.append(np.array([where.get(int(r), -1) for r in state.rows[b][h]], dtype=np.int64))
                slot_rows.append(per_head)
        scores = torch.full((batch, kv_heads, length), -2.0)
        for b in range(batch):
            for h in range(kv_heads):
                policy = state.policies[b][h]
                rows = slot_rows[b][h]
                present = rows >= 0
                plan = policy.plan_to(min(n_kept, int(present.sum())))
                move_to = plan.move_to.astype(np.int64)
                value = np.where(move_to >= 0, length - move_to, -1).astype(np.float32)
                scores[b, h, torch.from_numpy(rows[present])] = torch.from_numpy(value[present])
        return scores.to(keys.device)

    def compress(
        self,
        module: nn.Module,
        hidden_states: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        attentions: torch.Tensor,
        kwargs: dict,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """kvpress's ScorerPress rule (top-k of :meth:`score`, gather); the policies follow the
        kept rows in the layer's follow hook, whatever presses run after this one."""
        if self.compression_ratio == 0:
            return keys, values
        state = self._layers.get(module.layer_idx)
        from_cache = state is not None and keys is state.keys
        scores = self.score(module, hidden_states, keys, values, attentions, kwargs)
        n_kept = compute_n_kept(keys.shape[2], self.compression_ratio)
        indices = scores.topk(n_kept, dim=-1).indices  # [batch, kv_heads, n_kept]
        gather = indices.unsqueeze(-1).expand(-1, -1, -1, module.head_dim)
        keys = keys.gather(2, gather).contiguous()
        values = values.gather(2, gather).contiguous()
        if from_cache:
            # The follow hook maps the cache's rows back through these indices when the cache
            # ends up holding exactly this gather (else it matches rows by their keys).
            state.note = (keys, indices.to("cpu").numpy().astype(np.int64))
        return keys, values


_patch_kvpress()
