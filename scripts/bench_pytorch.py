#!/usr/bin/env python3
"""PyTorch CPU baseline for `make bench`: the same GPT-2 (nanoGPT-style: tanh
GELU, LayerNorm eps 1e-5, tied embeddings, causal attention, vocab padded to
50304), the same batch, fp32, AdamW, the same thread count as gotrain.

    python3 scripts/bench_pytorch.py --model gpt2-tiny --batch 8 --seq 256 --threads 2

Prints tokens/s over the timed steps (the first step is warm-up). Needs
PyTorch (Debian: python3-torch); gotrain itself never does.
"""
import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

PRESETS = {
    "gpt2-tiny": dict(n_layer=4, n_head=4, n_embd=256, n_positions=256),
    "gpt2": dict(n_layer=12, n_head=12, n_embd=768, n_positions=1024),
}
VOCAB = 50304  # GPT-2's 50257 padded to a multiple of 128, as gotrain and nanoGPT do


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1 = nn.LayerNorm(C, eps=1e-5)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C, eps=1e-5)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def attn(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        k = k.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        v = v.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True) if hasattr(F, "scaled_dot_product_attention") \
            else self._attn(q, k, v, T)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))

    def _attn(self, q, k, v, T):
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(torch.triu(torch.ones(T, T, dtype=torch.bool), 1), float("-inf"))
        return F.softmax(att, dim=-1) @ v

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        C = cfg["n_embd"]
        self.wte = nn.Embedding(VOCAB, C)
        self.wpe = nn.Embedding(cfg["n_positions"], C)
        self.h = nn.ModuleList([Block(C, cfg["n_head"]) for _ in range(cfg["n_layer"])])
        self.ln_f = nn.LayerNorm(C, eps=1e-5)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.size(1)))
        for b in self.h:
            x = b(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="gpt2-tiny", choices=sorted(PRESETS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(PRESETS[a.model])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    x = torch.randint(0, 50257, (a.batch, a.seq))
    y = torch.randint(0, 50257, (a.batch, a.seq))
    times = []
    for _ in range(a.steps + 1):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    dt = sum(times[1:]) / a.steps
    print(f"pytorch {torch.__version__} {a.model} B{a.batch} T{a.seq} threads {a.threads}: "
          f"{a.batch * a.seq / dt:.0f} tokens/s ({dt * 1000:.0f} ms/step)")


if __name__ == "__main__":
    main()
