# SPDX-License-Identifier: Apache-2.0
"""audiokv.kvpress with the real kvpress and transformers, on a small randomly initialised
Llama built from a config here (no downloads). The oracle replays the model's own eager
attention weights (captured by a hook, not recomputed) through fresh audiokv policies."""

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="audiokv.kvpress needs torch (pip install .[kvpress])")
transformers = pytest.importorskip("transformers", reason="audiokv.kvpress needs transformers")
kvpress = pytest.importorskip("kvpress", reason="audiokv.kvpress needs kvpress==0.5.5")

import audiokv  # noqa: E402
from audiokv.kvpress import KVPRESS_TESTED_VERSION, AudioKVPress  # noqa: E402

LAYERS, HEADS, KV_HEADS = 2, 4, 2
GROUP = HEADS // KV_HEADS


def tiny_llama(seed=0):
    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=512,
    )
    config._attn_implementation = "eager"  # the hook below reads the attention weights
    return transformers.LlamaForCausalLM(config).eval()


def capture_attention(model):
    """Hooks that record each layer's attention weights [batch, heads, q, k] per call."""
    records = {layer: [] for layer in range(LAYERS)}
    handles = []
    for layer, block in enumerate(model.model.layers):

        def hook(module, args, kwargs, output, layer=layer):
            records[layer].append(output[1].detach().float().clone())

        handles.append(block.self_attn.register_forward_hook(hook, with_kwargs=True))
    return records, handles


def decode(model, cache, prompt, steps):
    """Greedy decoding with explicit positions (the cache shrinks, positions do not)."""
    out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
    token = out.logits[:, -1:].argmax(-1)
    position = prompt.shape[1]
    lengths = []
    for _ in range(steps):
        out = model(
            input_ids=token,
            past_key_values=cache,
            position_ids=torch.full((prompt.shape[0], 1), position),
            use_cache=True,
        )
        token = out.logits[:, -1:].argmax(-1)
        position += 1
        lengths.append([cache.layers[layer].keys.shape[2] for layer in range(LAYERS)])
    return lengths


def test_the_tested_kvpress_version_is_installed():
    from importlib.metadata import version

    assert version("kvpress") == KVPRESS_TESTED_VERSION


AUDIOKV_CONFIG = {"budget": 10, "capacity": 128, "min_retention_ms": 20.0, "frame_ms": 10.0}


@pytest.mark.parametrize(
    "policy, options",
    [
        ("h2o", {"recent_size": 3}),
        ("tova", {}),
        ("observed_attention", {}),
        ("audiokv", {"config": AUDIOKV_CONFIG}),
    ],
)
def test_decoding_press_holds_the_budget_and_keeps_the_policys_cells(policy, options):
    model = tiny_llama()
    batch, prompt_len, steps, target, interval = 2, 20, 16, 10, 4  # steps: a multiple of interval
    prompt = torch.randint(0, 128, (batch, prompt_len), generator=torch.Generator().manual_seed(1))
    if "config" in options:
        options = {"config": audiokv.AudioKVConfig(**options["config"])}
    records, handles = capture_attention(model)  # registered first: sees each step pre-compression
    press = kvpress.DecodingPress(
        base_press=AudioKVPress(policy=policy, budget=target, options=dict(options)),
        compression_interval=interval,
        target_size=target,
        hidden_states_buffer_size=interval,
    )
    cache = transformers.DynamicCache()
    with torch.no_grad(), press(model):
        lengths = decode(model, cache, prompt, steps)
        # press.reset() runs on exit; keep the press's kept sets (as of the last compression,
        # the last step) before it.
        kept = {
            (layer, b, h): press.base_press.kept_positions(layer, b, h).tolist()
            for layer in range(LAYERS)
            for b in range(batch)
            for h in range(KV_HEADS)
        }
    for handle in handles:
        handle.remove()

    # The cache holds at most target + interval cells from the first compression on, and
    # exactly the target right after each one.
    first = interval - 1
    for s, per_layer in enumerate(lengths):
        for n in per_layer:
            if s >= first:
                assert n <= target + interval
            if (s + 1) % interval == 0:
                assert n == target

    # Oracle: fresh policies fed the model's own attention rows, compressed at the same steps.
    for layer in range(LAYERS):
        rows = records[layer][1:]  # [0] is the prefill
        assert len(rows) == steps
        for b in range(batch):
            for h in range(KV_HEADS):
                ref = audiokv.make_policy(policy, budget=target, capacity=128, **options)
                ref.append(np.arange(prompt_len))
                for s, attention in enumerate(rows):
                    ref.append(prompt_len + s)
                    probs = attention[b, h * GROUP : (h + 1) * GROUP, 0].numpy()
                    assert probs.shape[1] == ref.num_cells  # the cache holds what the oracle holds
                    ref.observe_group(np.ascontiguousarray(probs, dtype=np.float32))
                    if (s + 1) % interval == 0:
                        ref.apply(ref.plan_to(target))
                assert kept[(layer, b, h)] == ref.positions.tolist(), (layer, b, h)


def test_press_alone_compresses_the_prompt_like_the_policy():
    """As a prefill press (kvpress ScorerPress): the prompt observed one query row at a time."""
    model = tiny_llama(seed=3)
    prompt_len = 24
    prompt = torch.randint(0, 128, (1, prompt_len), generator=torch.Generator().manual_seed(2))
    records, handles = capture_attention(model)
    press = AudioKVPress(policy="h2o", budget=12, options={"recent_size": 4}, compression_ratio=0.5)
    cache = transformers.DynamicCache()
    with torch.no_grad(), press(model):
        model(input_ids=prompt, past_key_values=cache, use_cache=True)
    for handle in handles:
        handle.remove()
    for layer in range(LAYERS):
        assert cache.layers[layer].keys.shape[2] == 12
        attention = records[layer][0][0]  # [heads, q, k]
        for h in range(KV_HEADS):
            ref = audiokv.make_policy("h2o", budget=12, recent_size=4, capacity=prompt_len)
            for t in range(prompt_len):
                ref.append(t)
                ref.observe_group(np.ascontiguousarray(attention[h * GROUP : (h + 1) * GROUP, t, : t + 1].numpy()))
            ref.apply(ref.plan_to(12))
            assert press.kept_positions(layer, 0, h).tolist() == ref.positions.tolist()


def test_cache_rows_are_the_kept_cells_keys():
    """After a compression each head's K rows are the pre-compression rows of its kept cells."""
    model = tiny_llama(seed=5)
    prompt = torch.randint(0, 128, (1, 16), generator=torch.Generator().manual_seed(4))
    press = AudioKVPress(policy="h2o", budget=8, options={"recent_size": 2}, compression_ratio=0.5)
    full = transformers.DynamicCache()
    with torch.no_grad():
        model(input_ids=prompt, past_key_values=full, use_cache=True)
    cache = transformers.DynamicCache()
    with torch.no_grad(), press(model):
        model(input_ids=prompt, past_key_values=cache, use_cache=True)
    for layer in range(LAYERS):
        for h in range(KV_HEADS):
            positions = torch.as_tensor(press.kept_positions(layer, 0, h))
            assert torch.equal(cache.layers[layer].keys[0, h], full.layers[layer].keys[0, h, positions])
            assert torch.equal(cache.layers[layer].values[0, h], full.layers[layer].values[0, h, positions])


def test_adakv_and_unknown_names_are_refused():
    with pytest.raises(audiokv.Error):
        AudioKVPress(policy="adakv")
    with pytest.raises(audiokv.Error):
        AudioKVPress(policy="no_such_policy")
