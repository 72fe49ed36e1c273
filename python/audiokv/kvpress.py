# SPDX-License-Identifier: Apache-2.0
"""An audiokv policy as a kvpress press (tested with kvpress 0.5.5, transformers 5.2, torch 2.x).

:class:`AudioKVPress` is a kvpress ``ScorerPress`` whose scores come from one audiokv policy per
(layer, batch row, KV head) that lives across calls. Use it as the ``base_press`` of kvpress's
``DecodingPress`` to compress during decoding with any registered policy::

    from kvpress import DecodingPress
    from audiokv.kvpress import AudioKVPress

    press = DecodingPress(base_press=AudioKVPress(policy="h2o", budget=256),
                          compression_interval=16, target_size=256,
                          hidden_states_buffer_size=16)
    with press(model):
        ...  # prefill and decode; each layer holds at most target_size + interval cells

What one compression does, per layer: the queries of the buffered decode steps are recomputed
from their hidden states (RoPE at their real positions, from ``position_ids``) and attend to the
cached keys with a causal mask by position; each (batch row, KV head) policy then replays those
steps in order (append the cells that existed at the step, ``observe_group`` the step's
``[group, cells]`` probabilities), plans down to kvpress's ``n_kept`` with ``plan_to`` and applies
the plan. The scores it returns make ``ScorerPress``'s top-k pick exactly the policy's kept
cells, in time order, so the policy's slots and the cache's rows stay aligned. Every head keeps
``n_kept`` cells, as HF caches are rectangular; a head's cells are its own (per-head selection,
memory really freed).

Exact replay needs every decode step buffered: ``hidden_states_buffer_size >=
compression_interval``. Steps that were not buffered are not observed (their cells are still
appended). The prefill is not observed under ``DecodingPress`` (it does not call its base press
then); used alone with ``compression_ratio``, the press observes the prompt one query row at a
time (H2O's rule) and compresses it once. ``adakv`` is refused (its heads keep different counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from kvpress.presses.scorer_press import ScorerPress
from kvpress.utils import get_prerope_query_states
from torch import nn

import audiokv

#: The kvpress release this module was written and tested against.
KVPRESS_TESTED_VERSION = "0.5.5"


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


@dataclass
class _LayerState:
    policies: list  # [batch][kv_head] audiokv.Policy


@dataclass
class AudioKVPress(ScorerPress):
    """kvpress press backed by audiokv policies (see the module documentation). Give the
    fields by keyword: kvpress's ``compression_ratio`` is the first positional field.

    Parameters
    ----------
    policy : str
        A name from :func:`audiokv.policy_names` (not ``"adakv"``).
    budget : int
        The policies' budget B (h2o's default recent window is B / 2, snapkv's window is its
        own option). 0: the first compression's ``n_kept``.
    capacity : int
        Slots of each policy; 0: twice the larger of the first compression's cache length and
        the budget. A cache that grows beyond it between compressions raises :class:`audiokv.Error`.
    options : dict
        Further :func:`audiokv.make_policy` options (``window``, ``recent_size``, ``config``, ...).
        ``group_size`` is set from the model for snapkv and pyramidkv.
    compression_ratio : float
        kvpress's ratio; ``DecodingPress`` sets it for each compression.
    """

    policy: str = "audiokv"
    budget: int = 0
    capacity: int = 0
    options: dict = field(default_factory=dict)
    compression_ratio: float = 0.0

    def __post_init__(self):
        super().__post_init__()
        if self.policy not in audiokv.policy_names() or self.policy == "adakv":
            raise audiokv.Error(
                f"audiokv.kvpress: policy = {self.policy!r}: must be a registered name other than adakv",
                "policy",
            )
        if self.budget < 0 or self.capacity < 0:
            raise audiokv.Error("audiokv.kvpress: budget and capacity must be >= 0", "budget")
        self._layers: dict[int, _LayerState] = {}

    # -- state -------------------------------------------------------------------------------

    def post_init_from_model(self, model):
        """Called by kvpress when the press is entered (``with press(model)``): a new sequence."""
        self.reset()

    def reset(self) -> None:
        """Forgets every policy (the next compression starts a new sequence)."""
        self._layers = {}

    def layer_policies(self, layer_idx: int) -> list:
        """``[batch][kv_head]`` audiokv policies of one layer (empty before its first compression)."""
        state = self._layers.get(layer_idx)
        return [] if state is None else state.policies

    def kept_positions(self, layer_idx: int, batch: int, head: int) -> np.ndarray:
        """Positions of the cells the (layer, batch row, KV head) cache holds, in row order."""
        return self._layers[layer_idx].policies[batch][head].positions

    def _new_state(self, batch: int, heads: int, group: int, length: int, n_kept: int) -> _LayerState:
        budget = self.budget or max(1, n_kept)
        capacity = self.capacity or 2 * max(length, budget)
        options = dict(self.options)
        if self.policy in ("snapkv", "pyramidkv"):
            options.setdefault("group_size", group)
        config = options.get("config")
        if config is not None:
            # A copy per layer with the press's budget and capacity where the config has none.
            copy = audiokv.AudioKVConfig()
            for name in audiokv._CONFIG_FIELDS_ALL:
                setattr(copy, name, getattr(config, name))
            copy.budget = copy.budget or budget
            copy.capacity = copy.capacity or max(capacity, copy.budget)
            options["config"] = copy
        else:
            options.setdefault("budget", budget)
            options.setdefault("capacity", capacity)
        return _LayerState([[audiokv.make_policy(self.policy, **options) for _ in range(heads)] for _ in range(batch)])

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
        batch, kv_heads, length, head_dim = keys.shape
        num_heads = module.config.num_attention_heads
        group = num_heads // kv_heads
        steps = hidden_states.shape[1]
        n_kept = _n_kept(length, self.compression_ratio)
        layer = module.layer_idx

        state = self._layers.get(layer)
        if state is None or len(state.policies) != batch or state.policies[0][0].num_cells > length:
            state = self._new_state(batch, kv_heads, group, length, n_kept)
            self._layers[layer] = state

        # Real positions of the buffered queries (the last `steps` tokens of each row).
        position_ids = kwargs.get("position_ids")
        if position_ids is None:
            position_ids = kwargs["cache_position"].unsqueeze(0)
        last = position_ids[:, -1].to("cpu").long()
        if last.numel() == 1 and batch > 1:
            last = last.expand(batch)
        offsets = torch.arange(steps - 1, -1, -1)
        query_pos = last.unsqueeze(1) - offsets.unsqueeze(0)  # [batch, steps]

        # Queries with RoPE at their positions, against every cached key.
        queries = get_prerope_query_states(module, hidden_states)  # [batch, heads, steps, dim]
        cos, sin = module.rotary_emb(hidden_states, query_pos.to(hidden_states.device))
        queries = queries * cos.unsqueeze(1) + _rotate_half(queries) * sin.unsqueeze(1)
        keys_full = keys.repeat_interleave(group, dim=1)
        scaling = getattr(module, "scaling", head_dim**-0.5)
        logits = torch.matmul(queries.float(), keys_full.float().transpose(2, 3)) * scaling
        logits = logits.to("cpu")  # [batch, heads, steps, length]

        scores = torch.full((batch, kv_heads, length), -1.0)
        for b in range(batch):
            for h in range(kv_heads):
                policy = state.policies[b][h]
                held = policy.positions
                fresh = length - len(held)
                new_pos = np.arange(int(last[b]) - fresh + 1, int(last[b]) + 1, dtype=np.int64)
                key_pos = np.concatenate([held.astype(np.int64), new_pos])
                rows = logits[b, h * group : (h + 1) * group].numpy()  # [group, steps, length]
                appended = len(held)
                for t in range(steps):
                    visible = int(np.searchsorted(key_pos, int(query_pos[b, t]), side="right"))
                    if visible > appended:
                        policy.append(key_pos[appended:visible])
                        appended = visible
                    step = rows[:, t, :visible].astype(np.float64)
                    step = np.exp(step - step.max(axis=1, keepdims=True))
                    probs = (step / step.sum(axis=1, keepdims=True)).astype(np.float32)
                    policy.observe_group(np.ascontiguousarray(probs))
                if appended < length:
                    policy.append(key_pos[appended:])
                plan = policy.plan_to(n_kept)
                policy.apply(plan)
                move_to = torch.from_numpy(plan.move_to.astype(np.int64))
                kept = move_to >= 0
                # Kept cells score length - new slot: top-k returns them in time order.
                scores[b, h, kept] = (length - move_to[kept]).float()
        return scores.to(keys.device)


def _n_kept(length: int, compression_ratio: float) -> int:
    from kvpress.utils import compute_n_kept

    return compute_n_kept(length, compression_ratio)
