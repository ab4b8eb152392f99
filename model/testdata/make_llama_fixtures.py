#!/usr/bin/env python3
"""Float64 PyTorch reference fixtures for gotrain's Llama family (package model).

A decoder written here in plain PyTorch from transformers' modeling semantics
(LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM):
RMSNorm, rotate_half RoPE with float32 inverse frequencies (default, linear,
llama3), grouped-query attention via repeat_kv, Qwen3's per-head q/k RMSNorm
before RoPE, Qwen2's q/k/v biases, SwiGLU, tied or untied output head. Each
case is a tiny Hugging Face snapshot (config.json plus safetensors in HF names
and nn.Linear [out, in] layout) with seeded random weights, and next to it the
float64 forward/backward and, for some cases, ten AdamW steps. The Go tests
load the snapshot as a user's checkpoint and must reproduce these numbers.

Regenerate (needs PyTorch and NumPy, e.g. Debian's python3-torch; CI does
not have them and uses the committed files; the output is byte-identical
from run to run):

    python3 model/testdata/make_llama_fixtures.py

Cases, each a directory llama_tiny/<case>/ next to this script. All have
hidden 32, 2 layers, 4 query heads, vocab 97, intermediate 48; batch B=2,
T=8 (full table in README.md):

  llama_gqa             llama, GQA 4:2, head_dim 8, untied, rope default,
                        F32, single model.safetensors
  llama_mqa_llama3rope  llama, MQA (1 kv head), tied, attention_bias and
                        mlp_bias, rope_scaling llama3 (all three branches of
                        the formula occur), eos_token_id a list
  llama_linear_rope     llama, GQA 4:2, no head_dim key, untied,
                        rope_scaling {"type": "linear", "factor": 2.0}
                        (legacy key), BF16 weights in two shards with
                        model.safetensors.index.json
  qwen2_bias            qwen2, GQA 4:2, q/k/v biases (no o_proj bias), tied,
                        sliding_window 4 but use_sliding_window false (so
                        every layer is full attention)
  qwen3_qknorm          qwen3, GQA 4:2, head_dim 16 (q_proj out 64 from
                        hidden 32), q_norm/k_norm, tied
  mistral               mistral, GQA 4:2, no head_dim key, untied,
                        sliding_window null

Files in every case directory:
  config.json            the HF config (v4 form: rope_theta + rope_scaling),
                         indent 2, sorted keys, as transformers writes it
  model.safetensors      the weights (F32; metadata {"format": "pt"}), or for
                         llama_linear_rope model-00001-of-00002.safetensors,
                         model-00002-of-00002.safetensors (BF16) and
                         model.safetensors.index.json ({"metadata":
                         {"total_size": N}, "weight_map": {name: file}})
  forward_backward.safetensors
                         inputs, targets (I32, (B,T)), logits (F32, (B,T,V)),
                         loss (F32 scalar, mean token cross-entropy over all
                         B*T targets) and grad.<hf name> (F32) for every
                         weight, same names and shapes as the weights; tied
                         cases have no lm_head, and grad.model.embed_tokens
                         .weight is the sum of both uses
Only in some case directories:
  training_steps.safetensors  (llama_gqa, llama_mqa_llama3rope,
                         llama_linear_rope, qwen2_bias, qwen3_qknorm)
                         tokens (I32, (10*2*B*T+1,)), losses, lrs, grad_norms
                         (F32, (10,)) of 10 AdamW steps with gradient accumulation 2,
                         clipping 1.0, weight decay 0.1 on matrices and
                         embeddings only, WarmupLR with DeepSpeed's step
                         timing, then final.<hf name> (F32): the weights after
                         step 10. Metadata: deepspeed_config (the JSON
                         trained with), seq_len. The same conventions as
                         make_fixtures.py's GPT-2 fixture.
  rope.safetensors       (llama_mqa_llama3rope, llama_linear_rope)
                         inv_freq (F32, (head_dim/2)) as transformers computes
                         it, cos and sin (F32, (16, head_dim)) for positions
                         0..15; metadata attention_factor, rope_type
  config_v5.json         (llama_mqa_llama3rope, qwen3_qknorm) the same model
                         in transformers v5's form: rope_parameters instead
                         of rope_theta/rope_scaling, dtype instead of
                         torch_dtype, layer_types, pad_token_id null

The math runs in float64 on the stored weights (for BF16, on their
bf16-rounded values widened exactly), so the fixtures are exact to the F32
rounding of the outputs. transformers' own casts to float32 (RMSNorm input,
softmax, logits) are identities for an F32 model and are left out; the RoPE
inverse frequencies are computed in float32 exactly as transformers does,
because their rounding is part of the table's definition, and cos/sin are
taken in float64 from them (transformers takes them in float32; the two
differ by less than 1e-7).

Before writing, the script asserts: gradients equal central finite differences
(relative 1e-6) on one element of every weight; repeat_kv attention equals the
explicit head mapping (query head h uses kv head h // (nh/nkv)); a second,
loop-by-loop NumPy forward written from the reference text (elementwise RoPE
formula) gives the same logits; the tied embedding's gradient equals the sum
of the untied embedding's and head's; every llama3 branch occurs; each scaled
RoPE changes the logits; the same training run in float32 stays within 1e-5
of the float64 losses (so an F32 implementation can match at 1e-4); clipping
engages in some step.
"""

import copy
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "llama_tiny")

B, T = 2, 8
V = 97  # not a multiple of 8, so no implementation can rely on padding
ROPE_TABLE_POSITIONS = 16

# ---------------------------------------------------------------------------
# Cases: config.json content exactly as written, plus what to produce.


def common(model_type, arch, **kw):
    cfg = dict(model_type=model_type, architectures=[arch], vocab_size=V, hidden_size=32,
               intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2, hidden_act="silu", initializer_range=0.02,
               max_position_embeddings=128, use_cache=True, attention_dropout=0.0,
               bos_token_id=1, eos_token_id=2, torch_dtype="float32")
    cfg.update(kw)
    return cfg


CASES = [
    dict(name="llama_gqa", seed=101, train=True, rope_file=False, v5=False, dtype="F32", shards=1,
         config=common("llama", "LlamaForCausalLM", head_dim=8, rms_norm_eps=1e-5, rope_theta=10000.0,
                       rope_scaling=None, tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                       pretraining_tp=1)),
    # llama3 with factor 8, low 1, high 4 and original context 1024: for
    # head_dim 8 and theta 1e4 the wavelengths 2*pi*10^(j) (j = 0..3) fall
    # below 256, below 256, between 256 and 1024, above 1024 — every branch.
    dict(name="llama_mqa_llama3rope", seed=202, train=True, rope_file=True, v5=True, dtype="F32", shards=1,
         config=common("llama", "LlamaForCausalLM", num_key_value_heads=1, head_dim=8, rms_norm_eps=1e-5,
                       rope_theta=10000.0, max_position_embeddings=8192,
                       rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                         high_freq_factor=4.0, original_max_position_embeddings=1024),
                       tie_word_embeddings=True, attention_bias=True, mlp_bias=True, pretraining_tp=1,
                       eos_token_id=[2, 3])),
    dict(name="llama_linear_rope", seed=303, train=True, rope_file=True, v5=False, dtype="BF16", shards=2,
         config=common("llama", "LlamaForCausalLM", rms_norm_eps=1e-5, rope_theta=10000.0,
                       max_position_embeddings=256, rope_scaling={"type": "linear", "factor": 2.0},
                       tie_word_embeddings=False, attention_bias=False, mlp_bias=False, pretraining_tp=1,
                       torch_dtype="bfloat16")),
    # sliding_window is set but use_sliding_window is false, so transformers
    # drops it and every layer is full attention; window 4 < T would show it.
    dict(name="qwen2_bias", seed=404, train=True, rope_file=False, v5=False, dtype="F32", shards=1,
         config=common("qwen2", "Qwen2ForCausalLM", rms_norm_eps=1e-6, rope_theta=1000000.0, rope_scaling=None,
                       tie_word_embeddings=True, use_sliding_window=False, sliding_window=4,
                       max_window_layers=1)),
    dict(name="qwen3_qknorm", seed=505, train=True, rope_file=False, v5=True, dtype="F32", shards=1,
         config=common("qwen3", "Qwen3ForCausalLM", head_dim=16, rms_norm_eps=1e-6, rope_theta=1000000.0,
                       rope_scaling=None, tie_word_embeddings=True, attention_bias=False,
                       use_sliding_window=False, sliding_window=None, max_window_layers=2)),
    dict(name="mistral", seed=606, train=False, rope_file=False, v5=False, dtype="F32", shards=1,
         config=common("mistral", "MistralForCausalLM", rms_norm_eps=1e-5, rope_theta=1000000.0,
                       sliding_window=None, tie_word_embeddings=False)),
]


def v5_config(cfg):
    """The same model as transformers v5 writes it: rope_parameters holds
    rope_theta and the variant; dtype replaces torch_dtype."""
    out = {k: v for k, v in cfg.items() if k not in ("rope_theta", "rope_scaling", "torch_dtype")}
    rp = {"rope_theta": cfg["rope_theta"], "rope_type": "default"}
    if cfg.get("rope_scaling"):
        rp.update(cfg["rope_scaling"])
        rp["rope_type"] = rp.pop("type", rp.get("rope_type"))
    out["rope_parameters"] = rp
    out["dtype"] = cfg["torch_dtype"]
    out["pad_token_id"] = None
    out["layer_types"] = ["full_attention"] * cfg["num_hidden_layers"]
    return out


# ---------------------------------------------------------------------------
# The config as transformers interprets it (section 1 of the HF reference).


class Spec:
    """The numerics a config.json selects, after transformers' defaults."""

    def __init__(self, cfg):
        mt = cfg["model_type"]
        assert mt in ("llama", "mistral", "qwen2", "qwen3"), mt
        self.model_type = mt
        self.H = cfg["hidden_size"]
        self.I = cfg["intermediate_size"]
        self.L = cfg["num_hidden_layers"]
        self.nh = cfg["num_attention_heads"]
        self.nkv = cfg.get("num_key_value_heads") or self.nh
        self.V = cfg["vocab_size"]
        self.eps = cfg["rms_norm_eps"]
        self.tied = cfg.get("tie_word_embeddings", False)
        if mt == "qwen3":
            self.hd = cfg.get("head_dim", 128)  # qwen3's class default, not H/nh
        elif mt == "qwen2":
            self.hd = self.H // self.nh  # no head_dim field
        else:
            self.hd = cfg.get("head_dim") or self.H // self.nh
        if mt == "qwen2":
            self.qkv_bias, self.o_bias, self.mlp_bias = True, False, False
        elif mt == "mistral":
            self.qkv_bias = self.o_bias = self.mlp_bias = False
        else:
            ab = cfg.get("attention_bias", False)
            self.qkv_bias, self.o_bias = ab, ab
            self.mlp_bias = cfg.get("mlp_bias", False) if mt == "llama" else False
        self.qk_norm = mt == "qwen3"
        # Sliding windows: qwen2/qwen3 keep sliding_window only with
        # use_sliding_window; mistral applies a non-null one. These fixtures
        # must all come out as full attention.
        if mt in ("qwen2", "qwen3"):
            window = cfg.get("sliding_window") if cfg.get("use_sliding_window", False) else None
        else:
            window = cfg.get("sliding_window")
        assert window is None or window >= cfg["max_position_embeddings"], "fixtures use full attention"
        # RoPE: v4 (rope_theta + rope_scaling, legacy "type") or v5 (rope_parameters).
        if "rope_parameters" in cfg:
            rp = dict(cfg["rope_parameters"])
        else:
            rp = dict(cfg.get("rope_scaling") or {})
            rp["rope_theta"] = cfg.get("rope_theta", 10000.0)
        if "type" in rp and "rope_type" not in rp:
            rp["rope_type"] = rp["type"]
        rp.pop("type", None)
        rp.setdefault("rope_type", "default")
        if rp["rope_type"] == "llama3":
            rp.setdefault("original_max_position_embeddings", cfg["max_position_embeddings"])
        self.rope = rp

    def key(self):
        return json.dumps(self.__dict__, sort_keys=True)


# ---------------------------------------------------------------------------
# RoPE (section 1.4 and 4.3).


def rope_inv_freq(spec):
    """Returns (inv_freq, attention_factor, branches): inv_freq float32
    (head_dim/2,) computed as transformers does (float32 arithmetic from an
    int64 arange), and for llama3 which branch each frequency took."""
    rp, d = spec.rope, spec.hd
    base = rp["rope_theta"]
    inv_freq = 1.0 / (base ** (torch.arange(0, d, 2, dtype=torch.int64).float() / d))
    branches = None
    kind = rp["rope_type"]
    if kind == "default":
        pass
    elif kind == "linear":
        inv_freq = inv_freq / rp["factor"]
    elif kind == "llama3":
        factor, lo_f, hi_f = rp["factor"], rp["low_freq_factor"], rp["high_freq_factor"]
        orig = rp["original_max_position_embeddings"]
        lo_wavelen, hi_wavelen = orig / lo_f, orig / hi_f
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > lo_wavelen, inv_freq / factor, inv_freq)
        smooth = (orig / wavelen - lo_f) / (hi_f - lo_f)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < hi_wavelen) * ~(wavelen > lo_wavelen)
        inv_freq = torch.where(medium, smoothed, scaled)
        branches = ["keep" if w < hi_wavelen else "divide" if w > lo_wavelen else "smooth" for w in wavelen.tolist()]
    else:
        raise ValueError(f"rope_type {kind!r} is not one these fixtures use")
    assert inv_freq.dtype == torch.float32
    return inv_freq, 1.0, branches


def rope_cos_sin(inv_freq, attention_factor, positions):
    """cos, sin (len(positions), head_dim) in float64 from the float32
    inv_freq: emb = concat(freqs, freqs), as transformers' rotary embedding."""
    freqs = positions.double()[:, None] * inv_freq.double()[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * attention_factor, emb.sin() * attention_factor


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def apply_rope(x, cos, sin):  # x (B, heads, T, hd); cos, sin (T, hd)
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep):
    """transformers' repeat_kv: (B, nkv, T, hd) -> (B, nkv*n_rep, T, hd)."""
    b, nkv, t, hd = x.shape
    return x[:, :, None, :, :].expand(b, nkv, n_rep, t, hd).reshape(b, nkv * n_rep, t, hd)


# ---------------------------------------------------------------------------
# The model, module names chosen so named_parameters() gives HF names.


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


class Attention(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.q_proj = nn.Linear(s.H, s.nh * s.hd, bias=s.qkv_bias)
        self.k_proj = nn.Linear(s.H, s.nkv * s.hd, bias=s.qkv_bias)
        self.v_proj = nn.Linear(s.H, s.nkv * s.hd, bias=s.qkv_bias)
        self.o_proj = nn.Linear(s.nh * s.hd, s.H, bias=s.o_bias)
        if s.qk_norm:
            self.q_norm = RMSNorm(s.hd, s.eps)
            self.k_norm = RMSNorm(s.hd, s.eps)

    def forward(self, x, cos, sin, explicit_gqa=False):
        s = self.s
        Bx, Tx, _ = x.shape
        q = self.q_proj(x).view(Bx, Tx, s.nh, s.hd)
        k = self.k_proj(x).view(Bx, Tx, s.nkv, s.hd)
        v = self.v_proj(x).view(Bx, Tx, s.nkv, s.hd)
        if s.qk_norm:  # per head, over hd, before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)  # (B, heads, T, hd)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        n_rep = s.nh // s.nkv
        if explicit_gqa:
            k = torch.stack([k[:, h // n_rep] for h in range(s.nh)], dim=1)
            v = torch.stack([v[:, h // n_rep] for h in range(s.nh)], dim=1)
        else:
            k, v = repeat_kv(k, n_rep), repeat_kv(v, n_rep)
        att = (q @ k.transpose(-2, -1)) * s.hd ** -0.5
        mask = torch.tril(torch.ones(Tx, Tx, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(Bx, Tx, s.nh * s.hd)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.gate_proj = nn.Linear(s.H, s.I, bias=s.mlp_bias)
        self.up_proj = nn.Linear(s.H, s.I, bias=s.mlp_bias)
        self.down_proj = nn.Linear(s.I, s.H, bias=s.mlp_bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, s):
        super().__init__()
        # Registration order as transformers' decoder layer, so the
        # state-dict order (and the shard split) is the same.
        self.self_attn = Attention(s)
        self.mlp = MLP(s)
        self.input_layernorm = RMSNorm(s.H, s.eps)
        self.post_attention_layernorm = RMSNorm(s.H, s.eps)

    def forward(self, x, cos, sin, explicit_gqa):
        h = x + self.self_attn(self.input_layernorm(x), cos, sin, explicit_gqa)
        return h + self.mlp(self.post_attention_layernorm(h))


class Inner(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.embed_tokens = nn.Embedding(s.V, s.H)
        self.layers = nn.ModuleList([Layer(s) for _ in range(s.L)])
        self.norm = RMSNorm(s.H, s.eps)


class CausalLM(nn.Module):
    def __init__(self, s):
        super().__init__()
        self.s = s
        self.model = Inner(s)
        if not s.tied:
            self.lm_head = nn.Linear(s.H, s.V, bias=False)
        self.inv_freq, self.attention_factor, _ = rope_inv_freq(s)

    def logits(self, idx, explicit_gqa=False):
        cos, sin = rope_cos_sin(self.inv_freq, self.attention_factor, torch.arange(idx.size(1)))
        cos, sin = cos.to(self.model.norm.weight.dtype), sin.to(self.model.norm.weight.dtype)
        x = self.model.embed_tokens(idx)  # no scaling
        for layer in self.model.layers:
            x = layer(x, cos, sin, explicit_gqa)
        x = self.model.norm(x)
        w = self.model.embed_tokens.weight if self.s.tied else self.lm_head.weight
        return x @ w.t()

    def forward(self, idx, targets, n_items=None, explicit_gqa=False):
        """Returns logits and the summed token cross-entropy divided by
        n_items (default: this batch's target count), as transformers'
        ForCausalLMLoss with num_items_in_batch."""
        logits = self.logits(idx, explicit_gqa)
        ce = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1), reduction="sum")
        return logits, ce / (targets.numel() if n_items is None else n_items)


def seeded_weights(s, gen):
    """HF name -> float32 tensor, drawn from gen in parameter order.

    Larger than a real init so attention is neither uniform nor saturated,
    and norm gains and biases differ from 1 and 0 so a dropped one shows.
    """
    out = {}
    for name, p in CausalLM(s).named_parameters():
        if name.endswith("norm.weight"):
            v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
        elif name.endswith(".bias"):
            v = 0.1 * torch.randn(p.shape, generator=gen)
        elif name in ("model.embed_tokens.weight", "lm_head.weight"):
            v = 0.25 * torch.randn(p.shape, generator=gen)
        else:
            v = 0.3 * torch.randn(p.shape, generator=gen)
        out[name] = v.float()
    return out


def build(s, weights, dtype):
    model = CausalLM(s).to(dtype)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(weights[name].to(dtype))
    return model


def stored(weights, wdtype):
    """The weights as the snapshot stores them (bf16 rounds to nearest even)."""
    if wdtype == "BF16":
        return {n: t.to(torch.bfloat16) for n, t in weights.items()}
    return weights


# ---------------------------------------------------------------------------
# Files.


def write_safetensors(path, tensors, metadata=None):
    """Writes the safetensors container by hand: u64 header length, JSON, data."""
    dtypes = {torch.float32: "F32", torch.int64: "I64", torch.int32: "I32", torch.bfloat16: "BF16"}
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        t = t.contiguous()
        arr = t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()
        raw = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtypes[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    hdr = json.dumps(header, separators=(",", ":")).encode()
    hdr += b" " * (-len(hdr) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hdr)))
        f.write(hdr)
        for raw in blobs:
            f.write(raw)


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f, indent=2, sort_keys=True)
        f.write("\n")


def nbytes(t):
    return t.numel() * t.element_size()


def write_snapshot(case, out, weights):
    """config.json plus the weights, one file or HF-sharded.

    Sharding follows huggingface_hub's split: tensors in state-dict order
    fill a shard until the next would exceed the limit. The limit here is
    60% of the total so the tiny model splits in two, like a real one. Each
    file lists its tensors sorted by name, as the safetensors writer does.
    """
    write_json(os.path.join(out, "config.json"), case["config"])
    if case["v5"]:
        write_json(os.path.join(out, "config_v5.json"), v5_config(case["config"]))
    if case["shards"] == 1:
        write_safetensors(os.path.join(out, "model.safetensors"), dict(sorted(weights.items())), {"format": "pt"})
        return
    total = sum(nbytes(t) for t in weights.values())
    limit = int(0.6 * total)
    shards, cur, size = [], [], 0
    for name, t in weights.items():
        if cur and size + nbytes(t) > limit:
            shards.append(cur)
            cur, size = [], 0
        cur.append(name)
        size += nbytes(t)
    shards.append(cur)
    assert len(shards) == case["shards"], f"{case['name']}: {len(shards)} shards"
    weight_map = {}
    for i, names in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        write_safetensors(os.path.join(out, fname), {n: weights[n] for n in sorted(names)}, {"format": "pt"})
        weight_map.update((n, fname) for n in names)
    write_json(os.path.join(out, "model.safetensors.index.json"),
               {"metadata": {"total_size": total}, "weight_map": weight_map})


# ---------------------------------------------------------------------------
# Sanity checks on the reference itself.


def check_finite_differences(model, idx, targets, gen):
    """One element of every weight: autograd against a central difference."""
    model.zero_grad(set_to_none=True)
    _, loss = model(idx, targets)
    loss.backward()
    h = 1e-5
    worst = 0.0
    for name, p in model.named_parameters():
        g = p.grad.reshape(-1)
        # An element with a gradient well above round-off, picked at random.
        big = (g.abs() >= 0.05 * g.abs().max()).nonzero().reshape(-1)
        i = big[torch.randint(0, big.numel(), (1,), generator=gen)].item()
        flat = p.data.view(-1)
        x0 = flat[i].item()
        with torch.no_grad():
            flat[i] = x0 + h
            lp = model(idx, targets)[1].item()
            flat[i] = x0 - h
            lm = model(idx, targets)[1].item()
            flat[i] = x0
        fd = (lp - lm) / (2 * h)
        rel = abs(fd - g[i].item()) / abs(g[i].item())
        worst = max(worst, rel)
        assert rel < 1e-6, f"{name}[{i}]: autograd {g[i].item():.10g}, finite difference {fd:.10g} (rel {rel:.2e})"
    model.zero_grad(set_to_none=True)
    return worst


def check_gqa_mapping(model, idx):
    a = model.logits(idx)
    b = model.logits(idx, explicit_gqa=True)
    assert torch.equal(a, b), f"repeat_kv and explicit mapping differ by {(a - b).abs().max().item()}"


def explicit_logits(s, weights, idx):
    """The forward once more, written out in NumPy from the reference text
    rather than from the modules above: per-element RoPE
    (q'_i = q_i cos - q_{i+d/2} sin for i < d/2, q_i cos + q_{i-d/2} sin
    after), query head h reading kv head h // (nh/nkv), loops over positions."""
    w = {n: t.double().numpy() for n, t in weights.items()}
    inv = rope_inv_freq(s)[0].double().numpy()
    d, half = s.hd, s.hd // 2

    def rms(x, g):
        return g * x / np.sqrt((x * x).mean(-1, keepdims=True) + s.eps)

    def lin(x, name):
        y = x @ w[name + ".weight"].T
        return y + w[name + ".bias"] if name + ".bias" in w else y

    def rope(v, t):  # v (heads, d) at position t
        out = np.empty_like(v)
        for i in range(d):
            j = i % half
            c, sn = math.cos(t * inv[j]), math.sin(t * inv[j])
            out[:, i] = v[:, i] * c - v[:, i + half] * sn if i < half else v[:, i] * c + v[:, i - half] * sn
        return out

    out = []
    for row in idx.tolist():
        x = w["model.embed_tokens.weight"][row]  # (T, H)
        for n in range(s.L):
            p = f"model.layers.{n}."
            a = rms(x, w[p + "input_layernorm.weight"])
            q = lin(a, p + "self_attn.q_proj").reshape(T, s.nh, d)
            k = lin(a, p + "self_attn.k_proj").reshape(T, s.nkv, d)
            v = lin(a, p + "self_attn.v_proj").reshape(T, s.nkv, d)
            if s.qk_norm:
                q, k = rms(q, w[p + "self_attn.q_norm.weight"]), rms(k, w[p + "self_attn.k_norm.weight"])
            q = np.stack([rope(q[t], t) for t in range(T)])
            k = np.stack([rope(k[t], t) for t in range(T)])
            y = np.zeros((T, s.nh, d))
            for h in range(s.nh):
                kv = h // (s.nh // s.nkv)
                for t in range(T):
                    sc = np.array([q[t, h] @ k[u, kv] for u in range(t + 1)]) / math.sqrt(d)
                    pr = np.exp(sc - sc.max())
                    y[t, h] = (pr / pr.sum()) @ v[: t + 1, kv]
            x = x + lin(y.reshape(T, s.nh * d), p + "self_attn.o_proj")
            m = rms(x, w[p + "post_attention_layernorm.weight"])
            g = lin(m, p + "mlp.gate_proj")
            x = x + lin(g / (1 + np.exp(-g)) * lin(m, p + "mlp.up_proj"), p + "mlp.down_proj")
        head = w["model.embed_tokens.weight"] if s.tied else w["lm_head.weight"]
        out.append(rms(x, w["model.norm.weight"]) @ head.T)
    return np.stack(out)


def check_explicit_forward(s, weights, model, idx):
    a = model.logits(idx).detach().numpy()
    b = explicit_logits(s, weights, idx)
    err = np.abs(a - b).max() / np.abs(b).max()
    assert err < 1e-12, f"module forward and explicit forward differ by {err:.2e}"


def check_tied_gradient(s, weights, idx, targets):
    """A tied model's embedding gradient is the untied embedding's gradient
    plus the untied head's, when both start from the same matrix."""
    tied = build(s, weights, torch.float64)
    _, loss = tied(idx, targets)
    loss.backward()
    us = copy.copy(s)
    us.tied = False
    uw = dict(weights, **{"lm_head.weight": weights["model.embed_tokens.weight"]})
    untied = build(us, uw, torch.float64)
    _, loss_u = untied(idx, targets)
    loss_u.backward()
    assert torch.allclose(loss, loss_u, rtol=0, atol=1e-14)
    want = untied.model.embed_tokens.weight.grad + untied.lm_head.weight.grad
    got = tied.model.embed_tokens.weight.grad
    assert torch.allclose(got, want, rtol=1e-12, atol=1e-15), "tied gradient is not the sum of both uses"


def check_rope_matters(case, s, model, idx):
    """The scaled RoPE must move the logits, or the fixture cannot catch an
    implementation that ignores rope_scaling. Returns the relative change."""
    plain = copy.copy(s)
    plain.rope = {"rope_theta": s.rope["rope_theta"], "rope_type": "default"}
    inv, af, _ = rope_inv_freq(plain)
    ref = copy.copy(model)
    ref.inv_freq, ref.attention_factor = inv, af
    a, b = model.logits(idx), ref.logits(idx)
    rel = ((a - b).abs().max() / a.abs().max()).item()
    assert rel > 1e-3, f"{case['name']}: rope_scaling changes the logits by only {rel:.2e}"
    return rel


# ---------------------------------------------------------------------------
# Fixtures.


def make_forward_backward(case, s, model, out, gen):
    idx = torch.randint(0, s.V, (B, T), generator=gen)
    targets = torch.randint(0, s.V, (B, T), generator=gen)
    model.zero_grad(set_to_none=True)
    logits, loss = model(idx, targets)
    loss.backward()
    ref = {"inputs": idx.to(torch.int32), "targets": targets.to(torch.int32),
           "logits": logits.detach().float(), "loss": loss.detach().float().reshape(())}
    ref.update(("grad." + n, p.grad.float()) for n, p in model.named_parameters())
    write_safetensors(os.path.join(out, "forward_backward.safetensors"), ref)
    model.zero_grad(set_to_none=True)
    return idx, targets, loss.item()


def write_rope(s, out):
    inv_freq, af, branches = rope_inv_freq(s)
    cos, sin = rope_cos_sin(inv_freq, af, torch.arange(ROPE_TABLE_POSITIONS))
    write_safetensors(os.path.join(out, "rope.safetensors"),
                      {"inv_freq": inv_freq, "cos": cos.float(), "sin": sin.float()},
                      {"attention_factor": repr(af), "rope_type": s.rope["rope_type"]})
    return branches


# The training fixture: STEPS optimizer steps of GAS micro-batches each, read
# from one token stream in llm.c's order (micro-batch i is tokens
# [i*B*T, i*B*T + B*T], targets shifted by one). The DeepSpeed config below is
# stored in the fixture's metadata; the Go test trains with exactly it. It is
# make_fixtures.py's config, so both families train under one setting.
STEPS, GAS = 10, 2
DS_CONFIG = {
    "train_micro_batch_size_per_gpu": B,
    "gradient_accumulation_steps": GAS,
    "gradient_clipping": 1.0,
    "optimizer": {"type": "AdamW", "params": {"lr": 1e-2, "betas": [0.9, 0.95], "eps": 1e-8, "weight_decay": 0.1}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_min_lr": 1e-3, "warmup_max_lr": 1e-2,
                                                  "warmup_num_steps": 5, "warmup_type": "linear"}},
}


def warmup_lr(k):
    """DeepSpeed WarmupLR (linear) as the engine applies it: optimizer step k
    (1-based) runs with the value at last_batch_iteration t = k - 2, and step 1
    with warmup_min_lr."""
    p = DS_CONFIG["scheduler"]["params"]
    lo, hi, W = p["warmup_min_lr"], p["warmup_max_lr"], max(2, p["warmup_num_steps"])
    t = k - 2
    gamma = 0.0 if t < 0 else (t / W if t < W else 1.0)
    return lo + (hi - lo) * gamma


def train(model, tokens):
    """Ten AdamW steps; returns per-step losses, lrs, pre-clip norms.

    The loss of a step is the summed cross-entropy over all GAS micro-batches
    divided by their total target count (transformers' Trainer with
    num_items_in_batch); every micro-batch has B*T targets here.
    """
    params = dict(model.named_parameters())
    decay = [p for p in params.values() if p.dim() >= 2]  # projections and embeddings
    no_decay = [p for p in params.values() if p.dim() < 2]  # biases, norm gains
    o = DS_CONFIG["optimizer"]["params"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"])
    n_items = GAS * B * T
    losses, lrs, norms = [], [], []
    micro = 0
    for k in range(1, STEPS + 1):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(GAS):
            chunk = tokens[micro * B * T: micro * B * T + B * T + 1]
            micro += 1
            x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
            _, loss = model(x, y, n_items=n_items)
            loss.backward()
            total += loss.item()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), DS_CONFIG["gradient_clipping"])
        lr = warmup_lr(k)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(total)
        lrs.append(lr)
        norms.append(norm.item())
    return losses, lrs, norms


def make_training_steps(case, s, weights, out):
    tokens = torch.randint(0, s.V, (STEPS * GAS * B * T + 1,),
                           generator=torch.Generator().manual_seed(case["seed"] + 1))
    model = build(s, weights, torch.float64)
    losses, lrs, norms = train(model, tokens)
    assert max(norms) > DS_CONFIG["gradient_clipping"], f"{case['name']}: clipping never engages"
    # Conditioning: the same run in float32 must track the float64 one well
    # inside the Go tests' 1e-4, or an F32 implementation could not match.
    losses32, _, _ = train(build(s, weights, torch.float32), tokens)
    drift = max(abs(a - b) / abs(b) for a, b in zip(losses32, losses))
    assert drift < 1e-5, f"{case['name']}: float32 training drifts {drift:.2e} from float64"
    ref = {"tokens": tokens.to(torch.int32),
           "losses": torch.tensor(losses, dtype=torch.float32),
           "lrs": torch.tensor(lrs, dtype=torch.float32),
           "grad_norms": torch.tensor(norms, dtype=torch.float32)}
    ref.update(("final." + n, p.detach().float()) for n, p in model.named_parameters())
    write_safetensors(os.path.join(out, "training_steps.safetensors"), ref,
                      {"deepspeed_config": json.dumps(DS_CONFIG, sort_keys=True), "seq_len": str(T)})
    return losses, norms, drift


def make_case(case):
    name = case["name"]
    out = os.path.join(OUT, name)
    os.makedirs(out, exist_ok=True)
    s = Spec(case["config"])
    if case["v5"]:
        assert Spec(v5_config(case["config"])).key() == s.key(), f"{name}: v5 config reads differently"
    gen = torch.Generator().manual_seed(case["seed"])
    f32 = seeded_weights(s, gen)
    disk = stored(f32, case["dtype"])
    # The reference starts from exactly what the snapshot holds.
    weights = {n: t.float() for n, t in disk.items()}
    write_snapshot(case, out, disk)

    model = build(s, weights, torch.float64)
    idx, targets, loss = make_forward_backward(case, s, model, out, gen)
    check_gqa_mapping(model, idx)
    check_explicit_forward(s, weights, model, idx)
    worst = check_finite_differences(model, idx, targets, torch.Generator().manual_seed(case["seed"] + 2))
    if s.tied:
        check_tied_gradient(s, weights, idx, targets)
    line = f"{name}: loss {loss:.6f}, finite differences within {worst:.1e}"
    if s.rope["rope_type"] != "default":
        line += f", rope_scaling moves logits {check_rope_matters(case, s, model, idx):.1e}"
    if case["rope_file"]:
        branches = write_rope(s, out)
        if branches is not None:
            assert set(branches) == {"keep", "smooth", "divide"}, f"{name}: llama3 branches {branches}"
            line += f", llama3 branches {branches}"
    print(line)
    if case["train"]:
        losses, norms, drift = make_training_steps(case, s, weights, out)
        print(f"  training losses " + " ".join(f"{v:.5f}" for v in losses))
        print(f"  grad norms " + " ".join(f"{v:.3f}" for v in norms) + f"; float32 drift {drift:.1e}")


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)  # one summation order on every machine
    for case in CASES:
        make_case(case)


if __name__ == "__main__":
    main()
