#!/usr/bin/env python3
"""PyTorch baseline beside `gotrain bench` (scripts/gpu-check.sh runs it):
training-step tokens/s and MFU of GPT-2 124M and Qwen3-0.6B with random
weights, bf16 autocast over fp32 weights, scaled_dot_product_attention
(FlashAttention where PyTorch has it) and fused AdamW.

    python3 scripts/bench_pytorch_gpu.py --model gpt2 --batch 8 --seq 1024
    python3 scripts/bench_pytorch_gpu.py --model qwen3-0.6b --batch 4 --seq 4096
    python3 scripts/bench_pytorch_gpu.py --model path/to/config.json --device cpu --dtype fp32

Nothing is downloaded: the models are built from their configurations in
code, with transformers' GPT2LMHeadModel / Qwen3ForCausalLM when transformers
is importable (--impl auto), else with the plain-torch modules below, which
follow the same modeling files. GPT-2's vocabulary is padded to 50304, as
gotrain and nanoGPT pad it, so both count the same FLOPs.

MFU uses gotrain's FLOPs per token (model.Config.FlopsPerToken): 6 x the
matmul weights (head included) + 6 x L x T x heads x head_dim, over the GPU's
dense bf16 peak (gotrain's table) or --peak-flops. The last line is

    RESULT impl=... model=... batch=B seq=T dtype=... attn=... step_ms=... tokens_per_s=... mfu_pct=... ...

for scripts to read. Needs PyTorch (1.13 or newer; 2.x for SDPA and fused
AdamW); gotrain itself never does.
"""
import argparse
import gc
import json
import math
import sys
import time

PRESETS = {
    # GPT-2's published shapes; vocab padded from 50257 to a multiple of 128.
    "gpt2-tiny": dict(model_type="gpt2", n_layer=4, n_head=4, n_embd=256, n_positions=256, vocab_size=50304),
    "gpt2": dict(model_type="gpt2", n_layer=12, n_head=12, n_embd=768, n_positions=1024, vocab_size=50304),
    # Qwen/Qwen3-0.6B's config.json (the fields the model reads).
    "qwen3-0.6b": dict(model_type="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
                       num_attention_heads=16, num_key_value_heads=8, head_dim=128, vocab_size=151936,
                       max_position_embeddings=40960, rope_theta=1000000.0, rms_norm_eps=1e-6,
                       tie_word_embeddings=True),
}

# Dense bf16 tensor-core peaks, FLOP/s: the same table as gotrain's
# gpuPeakFLOPS (cmd/gotrain/gpu.go), first substring match wins, so the two
# MFUs share a denominator.
GPU_PEAKS = [
    ("H200", 989e12), ("H100 PCIe", 756e12), ("H100", 989e12), ("H800", 989e12), ("GH200", 989e12),
    ("A100", 312e12), ("A800", 312e12), ("A10G", 70e12), ("A10", 125e12), ("L40S", 362e12), ("L40", 181e12),
    ("L4", 121e12), ("RTX 4090", 165e12), ("RTX 3090", 71e12), ("RTX A6000", 155e12),
]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gpt2",
                    help="gpt2, gpt2-tiny, qwen3-0.6b, or a Hugging Face config.json (model_type gpt2 or qwen3)")
    ap.add_argument("--batch", type=int, default=8, help="micro-batch size B")
    ap.add_argument("--seq", type=int, default=1024, help="sequence length T")
    ap.add_argument("--steps", type=int, default=10, help="timed steps")
    ap.add_argument("--warmup", type=int, default=2, help="untimed steps first, at least 1 (allocator, cuBLAS heuristics, kernel choice)")
    ap.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"], help="auto: cuda when available")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "fp32"],
                    help="bf16: autocast over fp32 weights (PyTorch AMP); fp32: no autocast")
    ap.add_argument("--impl", default="auto", choices=["auto", "transformers", "torch"],
                    help="model code: transformers' classes from a config, or the plain-torch modules here")
    ap.add_argument("--attn", default="auto", choices=["auto", "flash", "sdpa", "math"],
                    help="flash: SDPA restricted to FlashAttention (auto picks it on CUDA and falls back to "
                         "unrestricted SDPA if PyTorch refuses the shape); sdpa: PyTorch's choice; math: explicit softmax")
    ap.add_argument("--peak-flops", type=float, default=0,
                    help="peak FLOP/s for MFU (0: the GPU's dense bf16 peak from gotrain's table; none on CPU)")
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: PyTorch's default)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the weights and tokens")
    return ap.parse_args(argv)


def load_config(name):
    if name in PRESETS:
        return dict(PRESETS[name])
    with open(name) as f:
        cfg = json.load(f)
    if cfg.get("model_type") not in ("gpt2", "qwen3"):
        raise SystemExit(f"{name}: model_type {cfg.get('model_type')!r}: want gpt2 or qwen3")
    return cfg


def shape(cfg):
    """The dimensions gotrain's FlopsPerToken reads: L, C, NH, KV, HD, FF, Vp, and whether the MLP is SwiGLU."""
    if cfg["model_type"] == "gpt2":
        C, NH = cfg["n_embd"], cfg["n_head"]
        V = cfg["vocab_size"]
        return dict(L=cfg["n_layer"], C=C, NH=NH, KV=NH, HD=C // NH, FF=cfg.get("n_inner") or 4 * C,
                    Vp=(V + 127) // 128 * 128, swiglu=False, maxT=cfg["n_positions"])
    C, NH = cfg["hidden_size"], cfg["num_attention_heads"]
    return dict(L=cfg["num_hidden_layers"], C=C, NH=NH, KV=cfg.get("num_key_value_heads", NH),
                HD=cfg.get("head_dim") or C // NH, FF=cfg["intermediate_size"], Vp=cfg["vocab_size"], swiglu=True,
                maxT=cfg.get("max_position_embeddings", 1 << 30))


def flops_per_token(s, T):
    """gotrain's model.Config.FlopsPerToken, term for term."""
    attn = (s["NH"] + 2 * s["KV"]) * s["HD"] * s["C"] + s["NH"] * s["HD"] * s["C"]
    mlp = (3 if s["swiglu"] else 2) * s["FF"] * s["C"]
    w = s["L"] * (attn + mlp) + s["Vp"] * s["C"]
    return 6 * w + 6 * s["L"] * T * s["NH"] * s["HD"]


def build_torch_modules(torch):
    """Plain-torch GPT-2 and Qwen3, as transformers' modeling files compute them."""
    nn, F = torch.nn, torch.nn.functional
    has_sdpa = hasattr(F, "scaled_dot_product_attention")

    def attention(q, k, v, mode):
        # q (B, NH, T, HD); k, v (B, KV, T, HD). GQA by repeating k/v heads.
        if k.size(1) != q.size(1):
            rep = q.size(1) // k.size(1)
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        if has_sdpa and mode != "math":
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        T = q.size(-2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.ones(T, T, dtype=torch.bool, device=q.device).triu(1)
        return torch.softmax(att.masked_fill(mask, float("-inf")).float(), dim=-1).to(v.dtype) @ v

    class GPT2Block(nn.Module):
        def __init__(self, C, NH):
            super().__init__()
            self.NH = NH
            self.ln_1, self.ln_2 = nn.LayerNorm(C, eps=1e-5), nn.LayerNorm(C, eps=1e-5)
            self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
            self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

        def forward(self, x, mode):
            B, T, C = x.size()
            q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2)
                       for t in self.c_attn(self.ln_1(x)).split(C, dim=2))
            x = x + self.c_proj(attention(q, k, v, mode).transpose(1, 2).reshape(B, T, C))
            return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))

    class GPT2(nn.Module):
        def __init__(self, s):
            super().__init__()
            self.wte, self.wpe = nn.Embedding(s["Vp"], s["C"]), nn.Embedding(s["maxT"], s["C"])
            self.h = nn.ModuleList(GPT2Block(s["C"], s["NH"]) for _ in range(s["L"]))
            self.ln_f = nn.LayerNorm(s["C"], eps=1e-5)
            self.mode = "sdpa"

        def forward(self, idx):
            x = self.wte(idx) + self.wpe(torch.arange(idx.size(1), device=idx.device))
            for b in self.h:
                x = b(x, self.mode)
            return self.ln_f(x) @ self.wte.weight.t()

    class RMSNorm(nn.Module):
        # transformers' Qwen3RMSNorm: in fp32, then back to the input dtype.
        def __init__(self, n, eps):
            super().__init__()
            self.weight, self.eps = nn.Parameter(torch.ones(n)), eps

        def forward(self, x):
            h = x.float()
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * h.to(x.dtype)

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    class Qwen3Layer(nn.Module):
        def __init__(self, s, eps):
            super().__init__()
            C, NH, KV, HD = s["C"], s["NH"], s["KV"], s["HD"]
            self.NH, self.KV, self.HD = NH, KV, HD
            self.input_layernorm, self.post_attention_layernorm = RMSNorm(C, eps), RMSNorm(C, eps)
            self.q_proj, self.k_proj = nn.Linear(C, NH * HD, bias=False), nn.Linear(C, KV * HD, bias=False)
            self.v_proj, self.o_proj = nn.Linear(C, KV * HD, bias=False), nn.Linear(NH * HD, C, bias=False)
            self.q_norm, self.k_norm = RMSNorm(HD, eps), RMSNorm(HD, eps)
            self.gate_proj, self.up_proj = nn.Linear(C, s["FF"], bias=False), nn.Linear(C, s["FF"], bias=False)
            self.down_proj = nn.Linear(s["FF"], C, bias=False)

        def forward(self, x, cos, sin, mode):
            B, T, _ = x.size()
            h = self.input_layernorm(x)
            q = self.q_norm(self.q_proj(h).view(B, T, self.NH, self.HD)).transpose(1, 2)
            k = self.k_norm(self.k_proj(h).view(B, T, self.KV, self.HD)).transpose(1, 2)
            v = self.v_proj(h).view(B, T, self.KV, self.HD).transpose(1, 2)
            q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
            x = x + self.o_proj(attention(q, k.to(q.dtype), v.to(q.dtype), mode).transpose(1, 2).reshape(B, T, -1))
            h = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))

    class Qwen3(nn.Module):
        def __init__(self, s, cfg):
            super().__init__()
            eps = cfg.get("rms_norm_eps", 1e-6)
            self.embed_tokens = nn.Embedding(s["Vp"], s["C"])
            self.layers = nn.ModuleList(Qwen3Layer(s, eps) for _ in range(s["L"]))
            self.norm = RMSNorm(s["C"], eps)
            self.tied = cfg.get("tie_word_embeddings", True)
            if not self.tied:
                self.lm_head = nn.Linear(s["C"], s["Vp"], bias=False)
            self.HD, self.theta, self.mode = s["HD"], cfg.get("rope_theta", 10000.0), "sdpa"

        def forward(self, idx):
            T = idx.size(1)
            # fp32 inverse frequencies and angles, as transformers' default RoPE.
            inv = 1.0 / (self.theta ** (torch.arange(0, self.HD, 2, device=idx.device).float() / self.HD))
            ang = torch.outer(torch.arange(T, device=idx.device).float(), inv)
            emb = torch.cat((ang, ang), dim=-1)
            cos, sin = emb.cos(), emb.sin()
            x = self.embed_tokens(idx)
            for layer in self.layers:
                x = layer(x, cos, sin, self.mode)
            x = self.norm(x)
            return x @ self.embed_tokens.weight.t() if self.tied else self.lm_head(x)

    def init_weights(model):
        # transformers' _init_weights for both: N(0, 0.02), zero biases,
        # unit norm gains. nn.Embedding's own N(0, 1) would put a tied
        # head's logits, and the first loss, in the hundreds.
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        return model

    return (lambda s: init_weights(GPT2(s))), (lambda s, cfg: init_weights(Qwen3(s, cfg)))


def build_transformers(torch, cfg, s):
    import transformers
    from transformers import AutoModelForCausalLM
    if cfg["model_type"] == "gpt2":
        hf = transformers.GPT2Config(n_layer=s["L"], n_head=s["NH"], n_embd=s["C"], n_positions=s["maxT"],
                                     vocab_size=s["Vp"], resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     use_cache=False)
    else:
        keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "head_dim", "vocab_size", "max_position_embeddings", "rope_theta", "rms_norm_eps",
                "tie_word_embeddings")
        hf = transformers.Qwen3Config(**{k: cfg[k] for k in keys if k in cfg}, attention_dropout=0.0, use_cache=False)
    try:
        m = AutoModelForCausalLM.from_config(hf, attn_implementation="sdpa")
    except (TypeError, ValueError, ImportError):
        m = AutoModelForCausalLM.from_config(hf)
    return m, "transformers " + transformers.__version__


def build_model(torch, cfg, s, impl):
    """The model and a description of its code: transformers' when asked, or
    (auto) when it imports and builds this config; else the plain modules."""
    if impl in ("auto", "transformers"):
        try:
            return build_transformers(torch, cfg, s)
        except Exception as e:  # not installed, too old for Qwen3, a changed API
            if impl == "transformers":
                raise SystemExit(f"--impl transformers: {type(e).__name__}: {e}")
            print(f"note: transformers did not build the model ({type(e).__name__}: {str(e)[:120]}); "
                  "using the plain-torch modules", file=sys.stderr)
    GPT2, Qwen3 = build_torch_modules(torch)
    return (GPT2(s) if cfg["model_type"] == "gpt2" else Qwen3(s, cfg)), "torch (plain modules)"


def sdpa_context(torch, attn):
    """A context manager restricting SDPA to FlashAttention, or None where this PyTorch cannot."""
    if attn != "flash":
        return None
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        return lambda: sdpa_kernel(SDPBackend.FLASH_ATTENTION)
    except ImportError:
        pass
    if hasattr(torch.backends.cuda, "sdp_kernel"):
        return lambda: torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False, enable_mem_efficient=False)
    return None


def build_on(torch, dev, cfg, s, impl, attn):
    """build_model on the device itself: initialising 600M weights on the
    CPU first costs more than the timed steps."""
    import contextlib
    dctx = torch.device(dev) if hasattr(torch.device(dev), "__enter__") else contextlib.nullcontext()
    with dctx:
        model, impl = build_model(torch, cfg, s, impl)
    model = model.to(dev).train()
    if impl.startswith("torch"):
        model.mode = attn
    return model, impl


def measure(torch, a, model, dev, attn, x, y):
    """Runs a.warmup untimed and a.steps timed training steps of model with
    AdamW; returns the optimizer's name, the attention used, the mean step
    time and the last loss."""
    import contextlib
    F = torch.nn.functional
    # AdamW as gotrain runs it: decay on matrices and embeddings only.
    decay = [p for p in model.parameters() if p.dim() >= 2]
    other = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": other, "weight_decay": 0.0}]
    opt, optname = None, "AdamW"
    if dev == "cuda":
        try:
            opt, optname = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95), fused=True), "fused AdamW"
        except (TypeError, RuntimeError):
            pass
    if opt is None:
        opt = torch.optim.AdamW(groups, lr=1e-4, betas=(0.9, 0.95))

    amp = (lambda: torch.autocast(device_type=dev, dtype=torch.bfloat16)) if a.dtype == "bf16" \
        else contextlib.nullcontext
    flash = sdpa_context(torch, attn) if dev == "cuda" else None

    def step(restrict):
        with (restrict() if restrict else contextlib.nullcontext()), amp():
            out = model(x)
            logits = out if torch.is_tensor(out) else out.logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    attn_label = attn
    try:
        loss = step(flash)
    except RuntimeError as e:
        if flash is None:
            raise
        # PyTorch had no FlashAttention kernel for this call (a mask, dtype
        # or head size it refuses): measure its own choice and say so.
        flash, attn_label = None, "sdpa (flash refused: %s)" % str(e).splitlines()[0][:80]
        opt.zero_grad(set_to_none=True)
        loss = step(None)
    for _ in range(a.warmup - 1):
        loss = step(flash)
    sync()
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step(flash)
    sync()
    dt = (time.perf_counter() - t0) / a.steps
    return optname, attn_label, dt, loss


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    cfg = load_config(a.model)
    s = shape(cfg)
    if a.batch < 1 or a.steps < 1 or a.warmup < 1 or not 1 <= a.seq <= s["maxT"]:
        raise SystemExit(f"need batch ≥ 1, steps ≥ 1, warmup ≥ 1 and 1 ≤ seq ≤ {s['maxT']} (the model's context)")
    try:
        import torch
    except ImportError as e:
        print(f"PyTorch is not importable by {sys.executable}: {e}", file=sys.stderr)
        return 3

    F = torch.nn.functional
    dev = a.device
    if dev == "auto":
        dev = "cuda" if torch.cuda.is_available() else "cpu"
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch.cuda.is_available() is False (a CPU build, or no usable GPU)")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    attn = a.attn
    if attn == "auto":
        attn = "flash" if dev == "cuda" else "sdpa"
    if not hasattr(F, "scaled_dot_product_attention"):
        attn = "math"  # PyTorch 1.x

    V = cfg["vocab_size"] if cfg["model_type"] == "qwen3" else min(cfg["vocab_size"], 50257)
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    # Token ids from the real vocabulary, never the padding rows.
    tokens = torch.randint(0, V, (a.batch, a.seq + 1), generator=g).to(dev)
    x, y = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
    model, impl = build_on(torch, dev, cfg, s, a.impl, attn)
    failed = None
    try:
        optname, attn_label, dt, loss = measure(torch, a, model, dev, attn, x, y)
    except Exception as e:
        if a.impl != "auto" or not impl.startswith("transformers"):
            raise
        failed = f"{type(e).__name__}: {str(e)[:160]}"
    if failed:
        # transformers built the model but could not train it here: the
        # plain modules still give a baseline, and the note says why. Out
        # of the except block, so the traceback no longer holds the model.
        print(f"note: the transformers model failed ({failed}); measuring the plain-torch modules", file=sys.stderr)
        del model
        gc.collect()
        if dev == "cuda":
            torch.cuda.empty_cache()
        model, impl = build_on(torch, dev, cfg, s, "torch", attn)
        optname, attn_label, dt, loss = measure(torch, a, model, dev, attn, x, y)
    nparams = sum(p.numel() for p in model.parameters())

    tps = a.batch * a.seq / dt
    fpt = flops_per_token(s, a.seq)
    name = torch.cuda.get_device_name(0) if dev == "cuda" else "CPU (%d threads)" % torch.get_num_threads()
    peak = a.peak_flops
    if peak == 0 and dev == "cuda":
        peak = next((p for m, p in GPU_PEAKS if m in name), 0)
    mem = "%.1f GiB" % (torch.cuda.max_memory_allocated() / (1 << 30)) if dev == "cuda" else "n/a"
    mfu = 100 * tps * fpt / peak if peak > 0 else None
    precision = "bf16 autocast" if a.dtype == "bf16" else "fp32"
    print(f"pytorch {torch.__version__} | {name} | {impl} | {a.model} ({nparams:,} parameters), "
          f"B {a.batch} × T {a.seq}, {precision}, attention {attn_label}, {optname}")
    print(f"step {dt * 1e3:.1f} ms | {tps:.0f} tokens/s | {tps * fpt / 1e12:.1f} TFLOP/s | "
          + (f"MFU {mfu:.1f}% of {peak / 1e12:.0f} TFLOP/s" if mfu is not None else "MFU n/a (pass --peak-flops)")
          + f" | peak memory {mem} | loss {loss.item():.3f}")
    print(f"RESULT impl={impl.split()[0]} model={a.model} batch={a.batch} seq={a.seq} dtype={a.dtype} "
          f"attn={attn_label.split()[0]} step_ms={dt * 1e3:.1f} tokens_per_s={tps:.0f} "
          f"mfu_pct={'%.1f' % mfu if mfu is not None else 'n/a'} peak_tflops={peak / 1e12:.0f} params={nparams}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
