#!/usr/bin/env python3
"""Float64 PyTorch reference for training on masked rows (package trainer).

The tiny Qwen3 of model/testdata/llama_tiny/qwen3_qknorm (its committed
weights, and make_llama_fixtures.py's decoder, imported from there) trains
for STEPS AdamW steps on pre-tokenized {"input_ids", "labels"} rows, some
longer than T+1 tokens and some much shorter, with labels -100 on prompts.

Samples, as gotrain's row loader builds them (one row per sample, rows in
file order): the row's first T+1 tokens; inputs ids[t] (PAD past the row's
end), targets ids[t+1] where labels[t+1] is not -100 and t+1 is inside the
row, else ignored. A step takes the next GLOBAL_ROWS rows (every micro-batch
of every rank), however they are split over ranks and accumulation steps.

The loss of a step is the sum of token cross-entropies over every unmasked
target of the step divided by their count (transformers' Trainer since its
gradient-accumulation fix, counting the shifted targets); the gradient is
that loss's. The script also computes the mean of per-micro-batch means for
world size 1, GA 2, and asserts it differs from the reference by far more
than the Go test's 1e-4, so the test can tell the two definitions apart.

Regenerate (needs PyTorch and NumPy, e.g. Debian's python3-torch; the output
is byte-identical from run to run):

    python3 trainer/testdata/make_masked_fixture.py

Writes, next to this script:
  masked_rows.jsonl           the rows (one {"input_ids", "labels"} per line)
  masked_steps.safetensors    losses, lrs, grad_norms (F32, (STEPS,));
                              metadata deepspeed_config (train_batch_size
                              GLOBAL_ROWS, micro-batch 2: GA 2 on one rank,
                              GA 1 on two), seq_len, pad_id
"""

import importlib.util
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
MODEL_DIR = os.path.join(HERE, "..", "..", "model", "testdata")
CASE = os.path.join(MODEL_DIR, "llama_tiny", "qwen3_qknorm")

spec = importlib.util.spec_from_file_location("llama_fixtures", os.path.join(MODEL_DIR, "make_llama_fixtures.py"))
lf = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lf)

T = 8
MICRO = 2
GLOBAL_ROWS = 4
STEPS = 6
PAD = 0
DS_CONFIG = {
    "train_batch_size": GLOBAL_ROWS,
    "train_micro_batch_size_per_gpu": MICRO,
    "gradient_clipping": 1.0,
    "optimizer": lf.DS_CONFIG["optimizer"],
    "scheduler": lf.DS_CONFIG["scheduler"],
}


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


def make_rows(V):
    """Rows of varied length: some longer than T+1 (truncated), some of one
    to three tokens, prompts masked with -100, one row with a hole."""
    g = torch.Generator().manual_seed(1717)
    lengths = [12, 3, 9, 20, 5, 1, 10, 2, 15, 7, 9, 4, 30, 6, 11, 3, 8, 2, 13, 9, 5, 17, 4, 10]
    rows = []
    for i, n in enumerate(lengths):
        ids = torch.randint(0, V, (n,), generator=g).tolist()
        prompt = int(torch.randint(0, max(1, n // 2 + 1), (1,), generator=g))
        labels = [-100 if t < prompt else ids[t] for t in range(n)]
        if i == 6:  # a masked span inside the completion
            labels[6:8] = [-100, -100]
        rows.append({"input_ids": ids, "labels": labels})
    return rows


def sample(row):
    ids, labels = row["input_ids"][:T + 1], row["labels"][:T + 1]
    n = len(ids)
    x = [ids[t] if t < n else PAD for t in range(T)]
    y = [ids[t + 1] if t + 1 < n and labels[t + 1] != -100 else -100 for t in range(T)]
    return x, y


def train(model, rows, micro_means=False):
    params = dict(model.named_parameters())
    decay = [p for p in params.values() if p.dim() >= 2]
    no_decay = [p for p in params.values() if p.dim() < 2]
    o = DS_CONFIG["optimizer"]["params"]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": o["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=o["lr"], betas=tuple(o["betas"]), eps=o["eps"])
    losses, lrs, norms = [], [], []
    for k in range(1, STEPS + 1):
        opt.zero_grad(set_to_none=True)
        step_rows = rows[(k - 1) * GLOBAL_ROWS:k * GLOBAL_ROWS]
        xs, ys = zip(*(sample(r) for r in step_rows))
        x, y = torch.tensor(xs), torch.tensor(ys)
        if micro_means:  # one rank, GA 2, each micro-batch a token mean
            total = 0.0
            for m in range(GLOBAL_ROWS // MICRO):
                xm, ym = x[m * MICRO:(m + 1) * MICRO], y[m * MICRO:(m + 1) * MICRO]
                logits = model.logits(xm)
                loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), ym.reshape(-1), ignore_index=-100)
                (loss / (GLOBAL_ROWS // MICRO)).backward()
                total += loss.item() / (GLOBAL_ROWS // MICRO)
        else:
            logits = model.logits(x)
            ce = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=-100, reduction="sum")
            loss = ce / (y != -100).sum()
            loss.backward()
            total = loss.item()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), DS_CONFIG["gradient_clipping"])
        lr = lf.warmup_lr(k)
        for g in opt.param_groups:
            g["lr"] = lr
        opt.step()
        losses.append(total)
        lrs.append(lr)
        norms.append(norm.item())
    return losses, lrs, norms


def main():
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    with open(os.path.join(CASE, "config.json")) as f:
        s = lf.Spec(json.load(f))
    weights = read_safetensors(os.path.join(CASE, "model.safetensors"))
    rows = make_rows(s.V)
    assert any(len(r["input_ids"]) > T + 1 for r in rows) and any(len(r["input_ids"]) <= 3 for r in rows)
    losses, lrs, norms = train(lf.build(s, weights, torch.float64), rows)
    means, _, _ = train(lf.build(s, weights, torch.float64), rows, micro_means=True)
    gap = max(abs(a - b) / abs(b) for a, b in zip(means, losses))
    assert gap > 1e-2, f"a mean of micro-batch means is within {gap:.1e} of the token mean; the rows do not tell them apart"
    losses32, _, _ = train(lf.build(s, weights, torch.float32), rows)
    drift = max(abs(a - b) / abs(b) for a, b in zip(losses32, losses))
    assert drift < 1e-5, f"float32 training drifts {drift:.2e} from float64"
    with open(os.path.join(HERE, "masked_rows.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    lf.write_safetensors(os.path.join(HERE, "masked_steps.safetensors"),
                         {"losses": torch.tensor(losses, dtype=torch.float32),
                          "lrs": torch.tensor(lrs, dtype=torch.float32),
                          "grad_norms": torch.tensor(norms, dtype=torch.float32)},
                         {"deepspeed_config": json.dumps(DS_CONFIG, sort_keys=True), "seq_len": str(T), "pad_id": str(PAD)})
    print("losses " + " ".join(f"{v:.5f}" for v in losses))
    print("mean of micro-batch means " + " ".join(f"{v:.5f}" for v in means) + f" (apart by up to {gap:.1e})")
    print("grad norms " + " ".join(f"{v:.3f}" for v in norms) + f"; float32 drift {drift:.1e}")


if __name__ == "__main__":
    main()
