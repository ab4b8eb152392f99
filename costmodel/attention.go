package costmodel

// Attention on backend/cuda (kernels/attention.cu) is per-row scalar code:
// one warp per query row walks its keys with an online softmax (forward);
// backward recomputes every probability twice, once in a kernel per query
// row (dq and D = rowsum(dO∘O)) and once in a kernel per key row (dk, dv).
// All arithmetic is fp32 on the CUDA cores. Causal: a query row t sees
// t+1 keys, so a head has T(T+1)/2 (query, key) pairs. The bytes are each
// tensor once: the keys and values of a head (2·T·HD elements) are read by
// every row's warp but stay in L2 between them.

// attPairs is the causal (query, key) pairs of a call: B·NH·T(T+1)/2.
func attPairs(v view) float64 {
	T := float64(v.dim("T"))
	return float64(v.dim("B")*v.dim("NH")) * T * (T + 1) / 2
}

// attChunks is how often a row's scores are recomputed: once per 256
// output columns (the kernels' GT_ATT_DCHUNK).
func attChunks(v view) float64 { return float64((v.dim("HD") + 255) / 256) }

func attentionForward(v view) []Part {
	HD := float64(v.dim("HD"))
	// Per pair: the score (a dot product over HD) and weight·v over HD.
	flops := attPairs(v) * (2*HD*attChunks(v) + 2*HD)
	return []Part{{Name: "kernel attention forward (a warp per query row)", Unit: CUDACores, FLOPs: flops, Calls: 1,
		Bytes: v.bytes("qkv") + v.bytes("out") + v.bytes("lse")}}
}

func attentionBackward(v view) []Part {
	HD := float64(v.dim("HD"))
	rows := float64(v.dim("B") * v.dim("NH") * v.dim("T"))
	pairs, ch := attPairs(v), attChunks(v)
	dd := 4 * rows // D per query row, F32 scratch
	NH, KV := float64(v.dim("NH")), float64(v.dim("KV"))
	dq := v.bytes("dqkv") * NH / (NH + 2*KV) // the query third of dqkv; the rest is dk and dv
	return []Part{
		// Per pair: the score and dout·v (two dot products), dq += ds·k;
		// per row D = dout·out.
		{Name: "kernel attention backward dq (a warp per query row)", Unit: CUDACores, Calls: 1,
			FLOPs: pairs*(4*HD*ch+2*HD) + 2*HD*rows,
			Bytes: v.bytes("qkv") + v.bytes("dout") + v.bytes("out") + v.bytes("lse") + dq + dd},
		// Per pair again: the score and dout·v, dv += p·dout, dk += ds·q.
		{Name: "kernel attention backward dk, dv (a warp per key row)", Unit: CUDACores, Calls: 1,
			FLOPs: pairs * (4*HD*ch + 4*HD),
			Bytes: v.bytes("qkv") + v.bytes("dout") + v.bytes("lse") + dd + v.bytes("dqkv") - dq},
	}
}
