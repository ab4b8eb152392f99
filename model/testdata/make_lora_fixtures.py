#!/usr/bin/env python3
"""Float64 reference for LoRA fine-tuning (PEFT semantics), written from the
formula since PEFT itself is not needed: a targeted linear layer computes

    y = W x (+ b) + s * B (A x),   s = alpha / r   (use_rslora: alpha / sqrt(r))

with A (r, in), B (out, r); W, b and every other base tensor stay frozen.

For two base models already committed here (GPT-2's pytorch_tiny, whose
Conv1D weights PEFT adapts with the same A/B shapes, and the Llama-family
llama_tiny/llama_gqa) it draws an initial adapter with A and B both nonzero,
writes it as a PEFT adapter directory (adapter_config.json,
adapter_model.safetensors with base_model.model.<module>.lora_A/B.weight),
then runs five AdamW steps with gradient accumulation 2 and global-norm
clipping over the adapters only, in float64, and writes

  lora/<case>/adapter_model.safetensors   the initial adapter (F32)
  lora/<case>/adapter_config.json         PEFT's keys
  lora/<case>/training.safetensors        tokens (I32), losses, grad_norms
                                          (F32, (5,)), final.<PEFT name>
                                          (F32): the adapter after step 5,
                                          merged.<HF name> (F32): the base
                                          merged with the final adapter,
                                          W + s·B·A (GPT-2 Conv1D: its
                                          transpose), in the base's layout.
Metadata: lr, betas, eps, weight_decay, clip, gas, B, T.

Each case is then trained again from the same adapter and tokens with
lora_dropout 0.1 (DROPOUT): PEFT's dropout on each adapted module's input,
with the masks gotrain draws (backend/dropout.go: SplitMix64 bits of a seed
mixed from DROP_SEED, the micro-batch, the block, the projection slot and the
module's index in it, element i kept when its 32 bits are at least
ceil(p·2^32), kept values scaled by fp32(1/(1-p))), and writes
lora/<case>/dropout.safetensors: losses, grad_norms, final.<PEFT name>;
metadata lora_dropout, drop_seed.

Run from the repository root: python3 model/testdata/make_lora_fixtures.py
It writes byte-identical files on every run.
"""

import importlib.util
import json
import math
import os
import struct

import numpy as np
import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
torch.manual_seed(0)


def load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(HERE, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


gf = load("make_fixtures")
lf = load("make_llama_fixtures")

STEPS, GAS, B, T = 5, 2, 2, 8
HP = dict(lr=2e-2, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1, clip=0.5)


DROPOUT, DROP_SEED = 0.1, 77
M64 = (1 << 64) - 1
PHI = 0x9E3779B97F4A7C15


def dropout_bits(seed, idx):
    """backend.DropoutBits for a scalar seed over an int64 array of indices."""
    with np.errstate(over="ignore"):
        z = np.uint64(seed) + (idx.astype(np.uint64) + np.uint64(1)) * np.uint64(PHI)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z >> np.uint64(32)


def dropout_seed(base, *idx):
    """backend.DropoutSeed."""
    s = base
    for k in idx:
        hi = int(dropout_bits(s, np.array([k]))[0])
        lo = int(dropout_bits(s ^ 0xD1B54A32D192ED03, np.array([k]))[0])
        s = ((hi << 32) | lo) & M64
    return s


class Dropping:
    """The training pass's micro-batch seed, set before each forward."""
    seed = None


def dropout_mask(seed, shape, p):
    """The kept elements' scale (0 where dropped), float64, in row-major order."""
    p32 = float(np.float32(p))
    threshold = math.ceil(p32 * 2.0 ** 32)
    scale = float(np.float32(1 / (1 - p32)))
    n = int(np.prod(shape))
    keep = dropout_bits(seed, np.arange(n, dtype=np.int64)) >= np.uint64(threshold)
    return torch.from_numpy(np.where(keep, scale, 0.0).reshape(shape))


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        blob = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        a, b = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(blob[a:b], dtype="<f4").copy().reshape(info["shape"]))
    return out


class LoraLinear(nn.Module):
    """PEFT's lora.Linear: base(x) + s * B(A dropout(x)); dropout (p > 0)
    applies the mask of (Dropping.seed, layer, slot, index in the slot)."""

    def __init__(self, base, r, scale, A, Bm):
        super().__init__()
        self.base = base
        self.scale = scale
        self.lora_A = nn.Parameter(A.clone())
        self.lora_B = nn.Parameter(Bm.clone())
        self.p, self.where = 0.0, None

    def forward(self, x):
        xd = x
        if self.p > 0:
            xd = x * dropout_mask(dropout_seed(Dropping.seed, *self.where), x.shape, self.p)
        return self.base(x) + self.scale * ((xd @ self.lora_A.t()) @ self.lora_B.t())


def attach(model, prefix, targets, r, scale, gen):
    """Wraps every nn.Linear whose name matches PEFT's rule (equal, or ends
    with '.' + target). Returns PEFT name -> parameter, in module order."""
    named = {}
    for name, mod in list(model.named_modules()):
        if not isinstance(mod, nn.Linear) or name.endswith("lm_head"):
            continue
        if not any(name == t or name.endswith("." + t) for t in targets):
            continue
        out_f, in_f = mod.weight.shape
        bound = 1 / math.sqrt(in_f)
        A = ((torch.rand(r, in_f, generator=gen) * 2 - 1) * bound).float().double()
        Bm = (0.2 * torch.randn(out_f, r, generator=gen)).float().double()
        parent = model.get_submodule(name.rsplit(".", 1)[0])
        lora = LoraLinear(mod, r, scale, A, Bm)
        setattr(parent, name.rsplit(".", 1)[1], lora)
        peft = "base_model.model." + prefix + name
        named[peft + ".lora_A.weight"] = lora.lora_A
        named[peft + ".lora_B.weight"] = lora.lora_B
    for p in model.parameters():
        p.requires_grad_(False)
    for p in named.values():
        p.requires_grad_(True)
    return named


def train(forward, named, tokens, dropout=False):
    params = list(named.values())
    opt = torch.optim.AdamW(params, lr=HP["lr"], betas=HP["betas"], eps=HP["eps"], weight_decay=HP["weight_decay"])
    n_items = GAS * B * T
    losses, norms, micro = [], [], 0
    for _ in range(STEPS):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(GAS):
            chunk = tokens[micro * B * T: micro * B * T + B * T + 1]
            micro += 1
            x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
            Dropping.seed = dropout_seed(DROP_SEED, micro - 1) if dropout else None
            loss = forward(x, y) * (B * T) / n_items
            loss.backward()
            total += loss.item()
        norms.append(torch.nn.utils.clip_grad_norm_(params, HP["clip"]).item())
        opt.step()
        losses.append(total)
    return losses, norms


def merged(base, named, scale, prefix, conv1d):
    """The base's HF tensors with each adapter merged: W + s·B·A, stored in
    the base's layout (GPT-2 Conv1D: (in, out), so (s·B·A)ᵀ is added)."""
    out = {n: t.double().clone() for n, t in base.items()}
    for name, p in named.items():
        if not name.endswith(".lora_A.weight"):
            continue
        module = name[len("base_model.model." + prefix):-len(".lora_A.weight")]
        A, Bm = p.detach(), named[name.replace("lora_A", "lora_B")].detach()
        delta = scale * (Bm @ A)
        key = module + ".weight"
        out[key] += delta.t() if conv1d else delta
    return {n: t.float() for n, t in out.items()}


def write_case(name, cfg, named0, named, losses, norms, tokens, merged_w, targets):
    out = os.path.join(HERE, "lora", name)
    os.makedirs(out, exist_ok=True)
    gf.write_safetensors(os.path.join(out, "adapter_model.safetensors"),
                         {n: t.float() for n, t in named0.items()})
    with open(os.path.join(out, "adapter_config.json"), "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    ref = {"tokens": tokens.to(torch.int32),
           "losses": torch.tensor(losses, dtype=torch.float32),
           "grad_norms": torch.tensor(norms, dtype=torch.float32)}
    ref.update(("final." + n, p.detach().float()) for n, p in named.items())
    ref.update(("merged." + n, t) for n, t in merged_w.items())
    meta = {k: json.dumps(v) for k, v in HP.items()}
    meta.update(gas=str(GAS), B=str(B), T=str(T))
    gf.write_safetensors(os.path.join(out, "training.safetensors"), ref, meta)
    assert max(norms) > HP["clip"] > min(norms) or max(norms) > HP["clip"], (name, norms)
    print(name, "losses", [round(x, 5) for x in losses], "norms", [round(x, 4) for x in norms])


# slot (0 q/k/v or c_attn, 1 o_proj or attn.c_proj, 2 gate/up or c_fc,
# 3 down_proj or mlp.c_proj) and the order of the modules inside it.
SLOTS = {"c_attn": (0, 0), "attn.c_proj": (1, 0), "c_fc": (2, 0), "mlp.c_proj": (3, 0),
         "q_proj": (0, 0), "k_proj": (0, 1), "v_proj": (0, 2), "o_proj": (1, 0),
         "gate_proj": (2, 0), "up_proj": (2, 1), "down_proj": (3, 0)}


def set_dropout(model, p):
    """Gives every LoraLinear dropout p and its (block, slot, index among the
    block's adapted modules of that slot), as gotrain's adapter layout
    orders them."""
    loras = [(n, m) for n, m in model.named_modules() if isinstance(m, LoraLinear)]

    def key(name):
        parts = name.split(".")
        return parts[-2] + ".c_proj" if parts[-1] == "c_proj" else parts[-1]

    def block(name):
        parts = name.split(".")
        i = parts.index("h") if "h" in parts else parts.index("layers")
        return int(parts[i + 1])

    for name, m in loras:
        slot, pos = SLOTS[key(name)]
        peers = sorted(SLOTS[key(n)][1] for n, _ in loras if block(n) == block(name) and SLOTS[key(n)][0] == slot)
        m.p, m.where = p, (block(name), slot, peers.index(pos))


def dropout_case(name, model, named, named0, tokens, fwd):
    set_dropout(model, DROPOUT)
    with torch.no_grad():
        for n, p in named.items():
            p.copy_(named0[n])
    losses, norms = train(fwd, named, tokens, dropout=True)
    ref = {"losses": torch.tensor(losses, dtype=torch.float32),
           "grad_norms": torch.tensor(norms, dtype=torch.float32)}
    ref.update(("final." + n, p.detach().float()) for n, p in named.items())
    meta = {"lora_dropout": json.dumps(DROPOUT), "drop_seed": json.dumps(DROP_SEED)}
    gf.write_safetensors(os.path.join(HERE, "lora", name, "dropout.safetensors"), ref, meta)
    print(name, "dropout losses", [round(x, 5) for x in losses], "norms", [round(x, 4) for x in norms])


def peft_config(base_path, r, alpha, targets, rslora, fan_in_fan_out):
    return {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_path,
            "r": r, "lora_alpha": alpha, "lora_dropout": 0.0, "target_modules": targets,
            "bias": "none", "use_rslora": rslora, "fan_in_fan_out": fan_in_fan_out,
            "modules_to_save": None, "init_lora_weights": True, "inference_mode": False}


def gpt2_case():
    base = read_safetensors(os.path.join(HERE, "pytorch_tiny", "model.safetensors"))
    model = gf.GPT(gf.CONFIG).double()
    with torch.no_grad():
        for n, p in model.named_parameters():
            t = base[n]
            p.copy_((t.t() if gf.is_conv1d(n) else t).double())
    r, alpha, targets = 4, 8, ["c_attn", "c_proj", "c_fc"]
    scale = alpha / r
    gen = torch.Generator().manual_seed(4242)
    named = attach(model, "transformer.", targets, r, scale, gen)
    named0 = {n: p.detach().clone() for n, p in named.items()}
    tokens = torch.randint(0, gf.CONFIG["vocab_size"], (STEPS * GAS * B * T + 1,), generator=gen)
    losses, norms = train(lambda x, y: model(x, y)[1], named, tokens)
    m = merged(base, named, scale, "transformer.", True)
    cfg = peft_config("pytorch_tiny", r, alpha, targets, False, True)
    write_case("gpt2", cfg, named0, named, losses, norms, tokens, m, targets)
    dropout_case("gpt2", model, named, named0, tokens, lambda x, y: model(x, y)[1])


def llama_case():
    d = os.path.join(HERE, "llama_tiny", "llama_gqa")
    with open(os.path.join(d, "config.json")) as f:
        spec = lf.Spec(json.load(f))
    base = read_safetensors(os.path.join(d, "model.safetensors"))
    model = lf.build(spec, base, torch.float64)
    # k_proj and gate_proj left out: the fused q/k/v and gate/up
    # projections are then only partly adapted.
    r, alpha, targets = 4, 8, ["q_proj", "v_proj", "o_proj", "up_proj", "down_proj"]
    scale = alpha / math.sqrt(r)  # use_rslora
    gen = torch.Generator().manual_seed(4343)
    named = attach(model, "", targets, r, scale, gen)
    named0 = {n: p.detach().clone() for n, p in named.items()}
    tokens = torch.randint(0, spec.V, (STEPS * GAS * B * T + 1,), generator=gen)

    def fwd(x, y):
        return model(x, y)[1]

    losses, norms = train(fwd, named, tokens)
    m = merged(base, named, scale, "", False)
    cfg = peft_config("llama_gqa", r, alpha, targets, True, False)
    write_case("llama_gqa", cfg, named0, named, losses, norms, tokens, m, targets)
    dropout_case("llama_gqa", model, named, named0, tokens, fwd)


if __name__ == "__main__":
    torch.set_grad_enabled(True)
    gpt2_case()
    llama_case()
