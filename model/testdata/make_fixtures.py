#!/usr/bin/env python3
"""PyTorch reference fixtures for gotrain's GPT-2 (package model).

A tiny GPT-2 written here in plain PyTorch, nanoGPT-style (tanh GELU,
LayerNorm eps 1e-5, tied embeddings, causal attention), with fixed weights
from a seeded generator, runs one forward and backward on a fixed batch. The
Go tests (pytorch_test.go) load the weights with LoadHF and must reproduce
the logits, the loss and every parameter gradient.

Regenerate (needs PyTorch and NumPy, e.g. Debian's python3-torch; CI does
not have them and uses the committed files):

    python3 model/testdata/make_fixtures.py

Outputs, in pytorch_tiny/ next to this script (about 100 KB):
  config.json            Hugging Face GPT2Config of the tiny model
  model.safetensors      weights, Hugging Face names, Conv1D (in, out) layout, F32
  training_steps.safetensors
                         a token stream (I32), and the loss, learning rate and
                         pre-clip gradient norm of each of 10 AdamW steps with
                         gradient accumulation, clipping and WarmupLR; the
                         DeepSpeed config used is in its metadata
  forward_backward.safetensors
                         inputs, targets (I64, (B,T)), logits (F32, (B,T,V)),
                         loss (F32 scalar, mean token cross-entropy) and
                         grad.<name> for every weight, in the same names and
                         layouts as model.safetensors

The math runs in float64 on the float32 weights, so the fixtures are exact
to float32 rounding. To add another fixture (e.g. several AdamW steps), write
a function like make_forward_backward() and call it from main().
"""

import json
import math
import os
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "pytorch_tiny")

# The tiny shape: L2 NH2 C16, V50 (gotrain pads it to 128), maxT16; batch 2x8.
CONFIG = dict(n_layer=2, n_head=2, n_embd=16, vocab_size=50, n_positions=16)
B, T = 2, 8
SEED = 1234


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.n_head = NH
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):
        Bx, Tx, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        hs = C // self.n_head
        q = q.view(Bx, Tx, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(Bx, Tx, self.n_head, hs).transpose(1, 2)
        v = v.view(Bx, Tx, self.n_head, hs).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))
        mask = torch.tril(torch.ones(Tx, Tx, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(Bx, Tx, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.gelu = NewGELU()
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.attn = CausalSelfAttention(C, NH)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg["n_embd"]
        self.wte = nn.Embedding(cfg["vocab_size"], C)
        self.wpe = nn.Embedding(cfg["n_positions"], C)
        self.h = nn.ModuleList([Block(C, cfg["n_head"]) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx, targets):
        pos = torch.arange(idx.size(1))
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()  # tied output layer
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def is_conv1d(name):
    """Hugging Face stores these Linear weights transposed, as Conv1D (in, out)."""
    return name.endswith(".weight") and any(
        k in name for k in (".attn.c_attn.", ".attn.c_proj.", ".mlp.c_fc.", ".mlp.c_proj."))


def hf_tensors(named, prefix=""):
    """Maps PyTorch (name, tensor) pairs to Hugging Face names and layouts."""
    out = {}
    for name, t in named:
        t = t.detach()
        if is_conv1d(name):
            t = t.t()
        out[prefix + name] = t.contiguous()
    return out


def write_safetensors(path, tensors, metadata=None):
    """Writes the safetensors container by hand: u64 header length, JSON, data."""
    dtypes = {torch.float32: "F32", torch.int64: "I64", torch.int32: "I32"}
    header, blobs, off = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name, t in tensors.items():
        arr = t.contiguous().numpy()
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


def seeded_model(gen):
    """Builds the model with weights drawn from gen, rounded to float32.

    The weights are larger than GPT-2's N(0, 0.02) init so that attention,
    GELU's curvature and the LayerNorm gains all shape the gradients.
    """
    model = GPT(CONFIG)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("ln_1.weight") or name.endswith("ln_2.weight") or name == "ln_f.weight":
                v = 1.0 + 0.2 * torch.randn(p.shape, generator=gen)
            elif name.endswith(".bias"):
                v = 0.1 * torch.randn(p.shape, generator=gen)
            else:
                v = 0.4 * torch.randn(p.shape, generator=gen)
            p.copy_(v.float())
    return model


def write_config(path):
    cfg = dict(CONFIG)
    cfg.update(model_type="gpt2", architectures=["GPT2LMHeadModel"], n_ctx=CONFIG["n_positions"],
               layer_norm_epsilon=1e-5, activation_function="gelu_new", tie_word_embeddings=True)
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")


def make_forward_backward():
    gen = torch.Generator().manual_seed(SEED)
    model = seeded_model(gen)
    idx = torch.randint(0, CONFIG["vocab_size"], (B, T), generator=gen)
    targets = torch.randint(0, CONFIG["vocab_size"], (B, T), generator=gen)

    write_config(os.path.join(OUT, "config.json"))
    write_safetensors(os.path.join(OUT, "model.safetensors"),
                      hf_tensors((n, p.float()) for n, p in model.named_parameters()), {"format": "pt"})

    model = model.double()  # float64 math on the float32 weights
    logits, loss = model(idx, targets)
    loss.backward()
    ref = {"inputs": idx, "targets": targets, "logits": logits.detach().float(),
           "loss": loss.detach().float().reshape(())}
    ref.update(hf_tensors(((n, p.grad.float()) for n, p in model.named_parameters()), prefix="grad."))
    write_safetensors(os.path.join(OUT, "forward_backward.safetensors"), ref)
    print(f"forward_backward: loss {loss.item():.6f}, {len(ref) - 4} gradients")


# The training fixture: STEPS optimizer steps of GAS micro-batches each, read
# from one token stream in llm.c's order (micro-batch i is tokens
# [i*B*T, i*B*T + B*T], targets shifted by one). The DeepSpeed config below is
# stored in the fixture's metadata; the Go test trains with exactly it.
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


def make_training_steps():
    gen = torch.Generator().manual_seed(SEED)
    model = seeded_model(gen).double()  # the same weights as model.safetensors
    tokens = torch.randint(0, CONFIG["vocab_size"], (STEPS * GAS * B * T + 1,),
                           generator=torch.Generator().manual_seed(SEED + 1))
    params = dict(model.named_parameters())
    decay = [p for n, p in params.items() if p.dim() >= 2]  # matrices and embeddings
    no_decay = [p for n, p in params.items() if p.dim() < 2]  # biases, LayerNorm gains
    o = DS_CONFIG["optimizer"]["params"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"])
    losses, lrs, norms = [], [], []
    micro = 0
    for k in range(1, STEPS + 1):
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(GAS):
            chunk = tokens[micro * B * T: micro * B * T + B * T + 1]
            micro += 1
            x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
            _, loss = model(x, y)
            (loss / GAS).backward()
            total += loss.item()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), DS_CONFIG["gradient_clipping"])
        lr = warmup_lr(k)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(total / GAS)
        lrs.append(lr)
        norms.append(norm.item())
    ref = {"tokens": tokens.to(torch.int32),
           "losses": torch.tensor(losses, dtype=torch.float32),
           "lrs": torch.tensor(lrs, dtype=torch.float32),
           "grad_norms": torch.tensor(norms, dtype=torch.float32)}
    write_safetensors(os.path.join(OUT, "training_steps.safetensors"), ref,
                      {"deepspeed_config": json.dumps(DS_CONFIG, sort_keys=True), "seq_len": str(T)})
    print("training_steps: losses " + " ".join(f"{v:.5f}" for v in losses))


def main():
    torch.use_deterministic_algorithms(True)
    os.makedirs(OUT, exist_ok=True)
    make_forward_backward()
    make_training_steps()


if __name__ == "__main__":
    main()
