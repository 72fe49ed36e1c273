# SPDX-License-Identifier: Apache-2.0
"""audiokv.kvpress with the real kvpress and transformers on small randomly initialised models
built from their configs (no downloads): a Llama, and the speech LLMs Qwen2-Audio and Voxtral fed
log-mel features of a real speech prompt (an Asterisk prompt, resampled with the ASR example's
tools, through the processor's feature extractor built locally).

Ground truth comes from the models, not from the press: a recorder hook (registered before the
press) keeps, for every cell, its position and key vector as the layer appended it, and the
model's own eager attention rows; "the cache's kept positions" are the positions of the key
vectors the cache holds after a step (minus the rows kvpress masks per head)."""

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="audiokv.kvpress needs torch (pip install .[kvpress])")
transformers = pytest.importorskip("transformers", reason="audiokv.kvpress needs transformers")
kvpress = pytest.importorskip("kvpress", reason="audiokv.kvpress needs kvpress==0.5.5")

import audiokv  # noqa: E402
from audiokv.kvpress import KVPRESS_TESTED_VERSION, AudioKVPress, find_decoder  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SOUNDS = ("/usr/share/asterisk/sounds/en", "/usr/share/asterisk/sounds/en_US_f_Allison")
AUDIO_ID = 127  # the tiny speech models' audio placeholder token
VOCAB = 128


# -- models ----------------------------------------------------------------------------------


def _text_config(**extra):
    return dict(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        head_dim=16,
        **extra,
    )


def _attn(config, attn):
    config._attn_implementation = attn
    for sub in ("text_config", "audio_config"):
        if hasattr(config, sub):
            getattr(config, sub)._attn_implementation = attn
    return config


def tiny_llama(seed=0, attn="eager"):
    torch.manual_seed(seed)
    return transformers.LlamaForCausalLM(_attn(transformers.LlamaConfig(**_text_config()), attn)).eval()


def tiny_qwen2_audio(seed=0, attn="eager"):
    torch.manual_seed(seed)
    config = transformers.Qwen2AudioConfig(
        audio_config=dict(
            d_model=32,
            encoder_layers=1,
            encoder_attention_heads=2,
            encoder_ffn_dim=64,
            num_mel_bins=128,
            max_source_positions=100,  # 200 mel frames: 2 s of audio
        ),
        text_config=dict(model_type="qwen2", **_text_config()),
        audio_token_index=AUDIO_ID,
    )
    return transformers.Qwen2AudioForConditionalGeneration(_attn(config, attn)).eval()


def tiny_voxtral(seed=0, attn="eager"):
    torch.manual_seed(seed)
    config = transformers.VoxtralConfig(
        audio_config=dict(
            hidden_size=32,
            intermediate_size=128,  # 4 encoder frames per audio token
            num_hidden_layers=1,
            num_attention_heads=2,
            num_mel_bins=128,
            max_source_positions=100,
        ),
        text_config=_text_config(rope_theta=10000.0),
        audio_token_id=AUDIO_ID,
    )
    return transformers.VoxtralForConditionalGeneration(_attn(config, attn)).eval()


# -- real speech through the audio front end -------------------------------------------------


def _speech(names):
    """16 kHz float32 waveforms of Asterisk prompts (read and resampled by the ASR example's
    tools/make_voices.py), cut to the shortest."""
    base = next((d for d in SOUNDS if os.path.isdir(d)), None)
    if base is None:
        pytest.skip("asterisk-core-sounds-en-wav is not installed (scripts/deps/asr.sh installs it)")
    spec = importlib.util.spec_from_file_location("make_voices", REPO / "examples/asr_whisper/tools/make_voices.py")
    voices = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(voices)
    waves = []
    for name in names:
        x, rate = voices.read_wav_float(os.path.join(base, name + ".wav"))
        waves.append(voices.resample_fft(x, rate, 16000).astype(np.float32))
    n = min(len(w) for w in waves)
    return [w[:n] for w in waves]


def _feature_extractor():
    # The processors' Whisper front end (128 mel bins, 10 ms hop), for 2 s windows.
    return transformers.WhisperFeatureExtractor(
        feature_size=128, sampling_rate=16000, hop_length=160, chunk_length=2, n_fft=400
    )


def _prompt_ids(n_audio, batch, seed):
    g = torch.Generator().manual_seed(seed)
    head = torch.randint(1, 100, (batch, 3), generator=g)
    tail = torch.randint(1, 100, (batch, 4), generator=g)
    return torch.cat([head, torch.full((batch, n_audio), AUDIO_ID), tail], dim=1)


def speech_inputs(model, batch):
    """Model inputs with real speech: text, the audio placeholder span, text."""
    clips = ["all-circuits-busy-now", "agent-pass"][:batch]
    waves = _speech(clips)
    if isinstance(model, transformers.Qwen2AudioForConditionalGeneration):
        feats = _feature_extractor()(waves, sampling_rate=16000, return_tensors="pt", return_attention_mask=True)
        _, n_audio = model.audio_tower._get_feat_extract_output_lengths(feats["attention_mask"].sum(-1))
        assert len(set(n_audio.tolist())) == 1
        ids = _prompt_ids(int(n_audio[0]), batch, seed=7)
        return dict(
            input_ids=ids, input_features=feats["input_features"], feature_attention_mask=feats["attention_mask"]
        )
    feats = _feature_extractor()(waves, sampling_rate=16000, return_tensors="pt")
    n_audio = feats["input_features"].shape[-1] // 2 // 4  # conv stride 2, 4 frames per token
    return dict(input_ids=_prompt_ids(n_audio, batch, seed=7), input_features=feats["input_features"])


def text_inputs(batch, length, seed):
    return dict(input_ids=torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed)))


# -- ground truth: what each layer appended, and what the cache holds ------------------------


class Recorder:
    """Forward hooks on the decoder's self-attention layers, registered before any press: for
    each forward, the new cells' positions and key vectors and the eager attention weights."""

    def __init__(self, model):
        self.decoder = find_decoder(model)
        self.layers = len(self.decoder.layers)
        self.position_of = [dict() for _ in range(self.layers)]  # (b, h, key bytes) -> position
        self.forwards = [[] for _ in range(self.layers)]  # (positions [b, q], weights | None)
        self.input_ids = []  # [batch, q] token ids of each forward
        self.handles = [
            layer.self_attn.register_forward_hook(self._hook, with_kwargs=True) for layer in self.decoder.layers
        ]
        self.handles.append(model.register_forward_pre_hook(self._ids, with_kwargs=True))

    def _ids(self, module, args, kwargs):
        self.input_ids.append(kwargs["input_ids"].numpy().copy())

    def _hook(self, module, args, kwargs, output):
        layer = module.layer_idx
        keys = kwargs["past_key_values"].layers[layer].keys
        q_len = kwargs["hidden_states"].shape[1]
        batch, heads = keys.shape[:2]
        ids = kwargs.get("position_ids")
        if ids is None:
            ids = kwargs["cache_position"].unsqueeze(0)
        positions = ids.to("cpu").long().expand(batch, q_len).numpy().copy()
        new = keys[:, :, -q_len:].detach().to("cpu").contiguous()
        for b in range(batch):
            for h in range(heads):
                for t in range(q_len):
                    self.position_of[layer][(b, h, new[b, h, t].numpy().tobytes())] = int(positions[b, t])
        weights = output[1].detach().float().clone() if output[1] is not None else None
        self.forwards[layer].append((positions, weights))

    def remove(self):
        for handle in self.handles:
            handle.remove()

    def cache_positions(self, cache, layer, b, h):
        """Positions of the cells the cache holds for (layer, b, h), in row order; a masked row
        (kvpress's per-head masking) or a row of unknown content is None."""
        keys = cache.layers[layer].keys[b, h].detach().to("cpu").contiguous()
        masked = getattr(self.decoder.layers[layer].self_attn, "masked_key_indices", None)
        dead = set()
        if masked is not None:
            for mb, mh, mr in zip(*(m.tolist() for m in masked)):
                if (mb, mh) == (b, h):
                    dead.add(mr)
        return [
            None if r in dead else self.position_of[layer].get((b, h, keys[r].numpy().tobytes()))
            for r in range(keys.shape[0])
        ]


def check_state_equals_cache(press, recorder, cache, batch, kv_heads, where):
    """The press's policies hold exactly the cells each (layer, row, head) cache holds."""
    for layer in range(recorder.layers):
        for b in range(batch):
            for h in range(kv_heads):
                truth = recorder.cache_positions(cache, layer, b, h)
                kept = [p for p in truth if p is not None]
                state = press.kept_positions(layer, b, h).tolist()
                assert state == sorted(kept), (where, layer, b, h)
                rows = press.kept_rows(layer, b, h).tolist()
                assert [truth[r] for r in rows] == state, (where, layer, b, h)


def run(model, inputs, steps, after_forward):
    """Prefill, then greedy decoding with explicit positions (the cache shrinks, positions do
    not); after_forward(step, cache) after every forward (step 0 is the prefill)."""
    cache = transformers.DynamicCache()
    with torch.no_grad():
        out = model(**inputs, past_key_values=cache, use_cache=True)
        after_forward(0, cache)
        token = out.logits[:, -1:].argmax(-1)
        position = inputs["input_ids"].shape[1]
        batch = inputs["input_ids"].shape[0]
        for s in range(1, steps + 1):
            out = model(
                input_ids=token, past_key_values=cache, position_ids=torch.full((batch, 1), position), use_cache=True
            )
            after_forward(s, cache)
            token = out.logits[:, -1:].argmax(-1)
            position += 1
    return cache


class Oracle:
    """Fresh audiokv policies fed the model's own eager attention rows (H2O's rule over the
    prompt), the frames the processor's audio ids call for, and compressed by DecodingPress's
    schedule (every `interval` decode forwards, to `target`, once the cache is longer)."""

    def __init__(self, policy, options, budget, layers, batch, kv_heads, group, capacity, audio_id=None):
        if "config" not in options:
            options = dict(options, budget=budget, capacity=capacity)
        self.policies = {
            (l, b, h): audiokv.make_policy(policy, **options)
            for l in range(layers)
            for b in range(batch)
            for h in range(kv_heads)
        }
        self.group, self.audio_id = group, audio_id

    def frames(self, ids):
        if self.audio_id is None:
            return np.ones(ids.shape, np.float32), np.zeros(ids.shape, np.uint8)
        audio = ids == self.audio_id
        start = audio & ~np.concatenate([np.zeros((ids.shape[0], 1), bool), audio[:, :-1]], axis=1)
        return audio.astype(np.float32), np.where(start, audiokv.FRAME_SEGMENT_START, 0).astype(np.uint8)

    def forward(self, layer, positions, weights, ids):
        voice, flags = self.frames(ids)
        for (l, b, h), ref in self.policies.items():
            if l != layer:
                continue
            for t in range(positions.shape[1]):
                ref.append(positions[b, t], voice=voice[b, t], flags=flags[b, t])
                row = weights[b, h * self.group : (h + 1) * self.group, t, : ref.num_cells].numpy()
                ref.observe_group(np.ascontiguousarray(row, dtype=np.float32))

    def compress(self, layer, target):
        for (l, _, _), ref in self.policies.items():
            if l == layer and ref.num_cells > target:
                ref.apply(ref.plan_to(target))


# -- tests -----------------------------------------------------------------------------------


def test_the_tested_kvpress_version_is_installed():
    from importlib.metadata import version

    assert version("kvpress") == KVPRESS_TESTED_VERSION


def _decoding_case(model, inputs, policy, options, target, interval, steps, audio_id=None):
    """AudioKVPress under DecodingPress: the cache bound, the state equal to the cache and to the
    oracle after every forward. Returns the press and the oracle."""
    text = model.config.get_text_config()
    kv_heads, group = text.num_key_value_heads, text.num_attention_heads // text.num_key_value_heads
    batch = inputs["input_ids"].shape[0]
    recorder = Recorder(model)
    oracle = Oracle(policy, options, target, recorder.layers, batch, kv_heads, group, 4 * 128, audio_id)
    press = kvpress.DecodingPress(
        base_press=AudioKVPress(policy=policy, budget=target, options=dict(options)),
        compression_interval=interval,
        target_size=target,
        hidden_states_buffer_size=0,  # the press observes every forward itself
    )
    def after_forward(step, cache):
        for layer in range(recorder.layers):
            positions, weights = recorder.forwards[layer][-1]
            oracle.forward(layer, positions, weights, recorder.input_ids[-1])
            if step > 0 and step % interval == 0:
                oracle.compress(layer, target)
            n = cache.layers[layer].keys.shape[2]
            if step >= interval:
                assert n <= target + interval, (step, layer, n)
            if step > 0 and step % interval == 0:
                assert n == target, (step, layer, n)
        check_state_equals_cache(press.base_press, recorder, cache, batch, kv_heads, step)
        for (layer, b, h), ref in oracle.policies.items():
            assert press.base_press.kept_positions(layer, b, h).tolist() == ref.positions.tolist(), (step, layer, b, h)

    with press(model):
        run(model, inputs, steps, after_forward)
    recorder.remove()
    return press, oracle


AUDIOKV_CONFIG = {"budget": 12, "capacity": 256, "min_retention_ms": 20.0, "frame_ms": 10.0}


@pytest.mark.parametrize(
    "policy, options",
    [
        ("h2o", {"recent_size": 3}),
        ("tova", {}),
        ("observed_attention", {}),
        ("audiokv", {"config": AUDIOKV_CONFIG}),
    ],
)
def test_decoding_press_on_a_text_llm_keeps_the_policys_cells(policy, options):
    if "config" in options:
        options = {"config": audiokv.AudioKVConfig(**options["config"])}
    _decoding_case(tiny_llama(), text_inputs(2, 20, seed=1), policy, options, target=12, interval=4, steps=12)


@pytest.mark.parametrize("build, frame_ms", [(tiny_qwen2_audio, 40.0), (tiny_voxtral, 80.0)], ids=["qwen2_audio", "voxtral"])
def test_speech_llm_decodes_under_decoding_press(build, frame_ms):
    """A random-config Qwen2-Audio / Voxtral fed real speech: hooks only on the decoder's
    self-attention, the cache bound, state == cache == oracle after every forward, and the audio
    span marked from the processor's audio ids (its first cell, a segment start, in the
    emergency pool: never evicted)."""
    model = build()
    batch = 2 if build is tiny_qwen2_audio else 1
    inputs = speech_inputs(model, batch)
    ids = inputs["input_ids"]
    n_prompt = ids.shape[1]
    target, interval = n_prompt // 2, 4
    config = audiokv.AudioKVConfig(budget=target, capacity=256, frame_ms=frame_ms, min_retention_ms=2 * frame_ms)
    options = {"config": config}

    # Hooks go on the decoder only: its self-attention layers (observe, and kvpress's own) and
    # its layers (follow); nothing in the audio encoder.
    press = kvpress.DecodingPress(
        base_press=AudioKVPress(policy="audiokv", budget=target), compression_interval=interval, target_size=target
    )
    decoder = find_decoder(model)
    attentions = {id(layer.self_attn) for layer in decoder.layers}
    layers = {id(layer) for layer in decoder.layers}
    with press(model):
        hooked = {id(m): m for m in model.modules() if m._forward_hooks}
        assert attentions <= set(hooked)
        assert set(hooked) <= attentions | layers
        assert all(len(hooked[a]._forward_hooks) == 2 for a in attentions)  # observe + kvpress
        assert not any(m._forward_hooks or m._forward_pre_hooks for m in model.audio_tower.modules())

    press, oracle = _decoding_case(model, inputs, "audiokv", options, target, interval, steps=12, audio_id=AUDIO_ID)
    first_audio = int(np.argmax(ids[0].numpy() == AUDIO_ID))
    for (layer, b, h), ref in oracle.policies.items():
        positions = press.base_press.kept_positions(layer, b, h).tolist()
        assert first_audio in positions, (layer, b, h)
        tiers = press.base_press.layer_policies(layer)[b][h].tiers
        assert tiers[positions.index(first_audio)] == 2  # emergency pool


def _qwen2_audio_sdpa_case(press, steps, kv_press):
    """Runs a random Qwen2-Audio (sdpa: no attention weights, the press recomputes them) on real
    speech under `press` and checks the state equals the cache after every forward."""
    model = tiny_qwen2_audio(seed=2, attn="sdpa")
    inputs = speech_inputs(model, 1)
    recorder = Recorder(model)
    lengths = []

    def after_forward(step, cache):
        lengths.append([cache.layers[layer].keys.shape[2] for layer in range(recorder.layers)])
        check_state_equals_cache(kv_press, recorder, cache, 1, 2, step)

    with press(model):
        run(model, inputs, steps, after_forward)
    recorder.remove()
    return lengths, inputs["input_ids"].shape[1], recorder


def test_inside_adakv_state_follows_the_masked_heads():
    inner = AudioKVPress(policy="h2o", budget=20, options={"recent_size": 4})
    press = kvpress.AdaKVPress(press=inner, alpha_safeguard=0.2)
    press.compression_ratio = 0.5
    lengths, n_prompt, recorder = _qwen2_audio_sdpa_case(press, 4, inner)
    counts = [len(inner.kept_positions(0, 0, h)) for h in range(2)]
    assert sum(counts) + 2 * 4 <= 2 * (n_prompt + 4)
    assert sum(counts) == 2 * (n_prompt // 2 + 4)  # half of the prompt masked, decode cells kept


def test_inside_decoding_press_with_recomputed_attention():
    inner = AudioKVPress(policy="h2o", budget=16, options={"recent_size": 4})
    press = kvpress.DecodingPress(base_press=inner, compression_interval=3, target_size=16)
    lengths, _, _ = _qwen2_audio_sdpa_case(press, 9, inner)
    assert all(n == 16 for n in lengths[3]) and all(n == 16 for n in lengths[9])


def test_inside_composed_press_state_follows_a_later_press():
    inner = AudioKVPress(policy="h2o", budget=30, options={"recent_size": 4}, compression_ratio=0.3)
    press = kvpress.ComposedPress([inner, kvpress.KnormPress(compression_ratio=0.3)])
    lengths, n_prompt, _ = _qwen2_audio_sdpa_case(press, 3, inner)
    assert lengths[0][0] < int(n_prompt * 0.7)  # knorm pruned after the press


def test_inside_composed_press_after_another_press():
    inner = AudioKVPress(policy="tova", budget=30, compression_ratio=0.3)
    press = kvpress.ComposedPress([kvpress.KnormPress(compression_ratio=0.3), inner])
    _qwen2_audio_sdpa_case(press, 3, inner)


def test_inside_per_layer_compression_press():
    inner = AudioKVPress(policy="h2o", budget=30, options={"recent_size": 4})
    press = kvpress.PerLayerCompressionPress(press=inner, compression_ratios=[0.25, 0.6])
    lengths, n_prompt, _ = _qwen2_audio_sdpa_case(press, 3, inner)
    assert lengths[0][0] > lengths[0][1]


def test_inside_critical_kv_press_state_follows_its_selection():
    inner = AudioKVPress(policy="observed_attention", budget=30)
    press = kvpress.CriticalKVPress(press=inner)
    press.compression_ratio = 0.5
    _qwen2_audio_sdpa_case(press, 3, inner)


def test_score_is_pure():
    """score() twice on the same cache: the same scores, and no policy changes."""
    model = tiny_llama(seed=4, attn="sdpa")
    inner = AudioKVPress(policy="h2o", budget=8, options={"recent_size": 2})
    press = kvpress.DecodingPress(base_press=inner, compression_interval=100, target_size=8)
    cache = transformers.DynamicCache()
    with torch.no_grad(), press(model):
        model(**text_inputs(1, 16, seed=3), past_key_values=cache, use_cache=True)
        attention = find_decoder(model).layers[1].self_attn
        keys, values = cache.layers[1].keys, cache.layers[1].values
        before = [p.positions.tolist() for p in inner.layer_policies(1)[0]]
        plans = [p.plan_to(5).evict.tolist() for p in inner.layer_policies(1)[0]]
        inner.compression_ratio = 0.5
        kwargs = {"past_key_values": cache}
        first = inner.score(attention, None, keys, values, None, kwargs)
        second = inner.score(attention, None, keys, values, None, kwargs)
        assert torch.equal(first, second)
        assert [p.positions.tolist() for p in inner.layer_policies(1)[0]] == before
        assert [p.plan_to(5).evict.tolist() for p in inner.layer_policies(1)[0]] == plans
        assert cache.layers[1].keys is keys


def test_press_alone_compresses_the_prompt_like_the_policy():
    """As a prefill press (kvpress ScorerPress): the prompt observed one query row at a time."""
    model = tiny_llama(seed=3)
    prompt_len, group, kv_heads = 24, 2, 2
    recorder = Recorder(model)
    press = AudioKVPress(policy="h2o", budget=12, options={"recent_size": 4}, compression_ratio=0.5)
    cache = transformers.DynamicCache()
    with torch.no_grad(), press(model):
        model(**text_inputs(1, prompt_len, seed=2), past_key_values=cache, use_cache=True)
    recorder.remove()
    for layer in range(recorder.layers):
        assert cache.layers[layer].keys.shape[2] == 12
        attention = recorder.forwards[layer][0][1][0]  # [heads, q, k]
        for h in range(kv_heads):
            ref = audiokv.make_policy("h2o", budget=12, recent_size=4, capacity=prompt_len)
            for t in range(prompt_len):
                ref.append(t)
                ref.observe_group(np.ascontiguousarray(attention[h * group : (h + 1) * group, t, : t + 1].numpy()))
            ref.apply(ref.plan_to(12))
            assert press.kept_positions(layer, 0, h).tolist() == ref.positions.tolist()


def test_cache_rows_are_the_kept_cells_keys():
    """After a compression each head's K rows are the pre-compression rows of its kept cells."""
    model = tiny_llama(seed=5)
    inputs = text_inputs(1, 16, seed=4)
    press = AudioKVPress(policy="h2o", budget=8, options={"recent_size": 2}, compression_ratio=0.5)
    full = transformers.DynamicCache()
    with torch.no_grad():
        model(**inputs, past_key_values=full, use_cache=True)
    cache = transformers.DynamicCache()
    with torch.no_grad(), press(model):
        model(**inputs, past_key_values=cache, use_cache=True)
    for layer in range(2):
        for h in range(2):
            positions = torch.as_tensor(press.kept_positions(layer, 0, h))
            assert torch.equal(cache.layers[layer].keys[0, h], full.layers[layer].keys[0, h, positions])
            assert torch.equal(cache.layers[layer].values[0, h], full.layers[layer].values[0, h, positions])


def test_speech_llms_attach_where_upstream_kvpress_cannot():
    """kvpress 0.5.5 alone raises AttributeError on Qwen2-Audio and Voxtral (no model.model);
    with audiokv.kvpress imported any press attaches to the decoder, and the model is left as
    it was (no `model` attribute, same parameters)."""
    for build in (tiny_qwen2_audio, tiny_voxtral):
        model = build()
        n_params = len(list(model.parameters()))
        assert find_decoder(model) is model.language_model.model
        with kvpress.KnormPress(compression_ratio=0.5)(model):
            assert model.model is model.language_model.model
            assert len(list(model.parameters())) == n_params
        assert "model" not in model.__dict__ and not hasattr(model, "model")


def test_find_decoder_layouts_and_errors():
    llama = tiny_llama()
    assert find_decoder(llama) is llama.model
    qwen = tiny_qwen2_audio()
    assert find_decoder(qwen) is qwen.language_model.model

    class Bare(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.language_model = inner

    bare = Bare(llama.model)
    assert find_decoder(bare) is llama.model
    with pytest.raises(audiokv.Error) as err:
        find_decoder(torch.nn.Linear(2, 2))
    assert err.value.argument == "model"


def test_bad_options_are_refused():
    with pytest.raises(audiokv.Error):
        AudioKVPress(policy="adakv", budget=4)
    with pytest.raises(audiokv.Error):
        AudioKVPress(policy="no_such_policy", budget=4)
    with pytest.raises(audiokv.Error) as err:
        AudioKVPress(policy="h2o")
    assert err.value.argument == "budget"
