package trainer_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gotrain/gotrain/backend/cpu"
	"github.com/gotrain/gotrain/blas"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/data"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
	"github.com/gotrain/gotrain/zero"
)

// evalSample is one validation sample as the reference scores it alone:
// T inputs and targets, ignored targets negative.
type evalSample struct{ in, tg []int32 }

// referenceValLoss is the token-weighted mean loss over samples, each
// forwarded alone (B = 1) through a fresh one-rank model holding the
// weights in dir, and summed in float64.
func referenceValLoss(t *testing.T, dir string, T int, samples []evalSample) float64 {
	t.Helper()
	be := cpu.New(cpu.Options{Gemm: blas.Gonum{}, Threads: 1})
	src, err := model.OpenInitFrom(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cfg := src.Config()
	eng, err := zero.New(context.Background(), be, comm.NewSolo(be), zero.LayoutOf(model.NewLayout(cfg)), zero.DefaultOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	if err := trainer.InitParamsFrom(eng, src); err != nil {
		t.Fatal(err)
	}
	m, err := model.New(be, cfg, model.Options{Store: eng})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Free()
	var sum float64
	var count int
	for _, s := range samples {
		n := 0
		for _, x := range s.tg {
			if x >= 0 {
				n++
			}
		}
		if n == 0 {
			continue
		}
		loss, err := m.Forward(s.in, s.tg, 1, T)
		if err != nil {
			t.Fatal(err)
		}
		sum += float64(loss) * float64(n)
		count += n
	}
	return sum / float64(count)
}

// firstValLoss is the val_loss logged at step 0 in out's metrics.jsonl.
func firstValLoss(t *testing.T, out string) float64 {
	t.Helper()
	f, err := os.Open(filepath.Join(out, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l struct {
			Step    int      `json:"step"`
			ValLoss *float64 `json:"val_loss"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		if l.ValLoss != nil && l.Step == 0 {
			return *l.ValLoss
		}
	}
	t.Fatalf("%s logs no val_loss at step 0", out)
	return 0
}

// valRows writes ten rows of lengths 1 to 10 whose first half is a prompt
// (no label) as a masked shard, and returns them as the samples a row is
// (its first T+1 tokens; inputs padded with pad, targets ignored).
func valRows(t *testing.T, path string, T, V int) []evalSample {
	t.Helper()
	const pad = 3
	var toks []int32
	var labels [][]bool
	var out []evalSample
	for j := range 10 {
		n := 1 + j
		lab := make([]bool, n)
		row := make([]int32, n)
		for i := range n {
			lab[i], row[i] = i >= n/2, int32((7*j+5*i+1)%V)
		}
		toks, labels = append(toks, row...), append(labels, lab)
		s := evalSample{make([]int32, T), make([]int32, T)}
		for i := range T {
			s.in[i], s.tg[i] = pad, data.IgnoreTarget
			if i < min(n, T+1) {
				s.in[i] = row[i]
			}
			if i+1 < min(n, T+1) && lab[i+1] {
				s.tg[i] = row[i+1]
			}
		}
		out = append(out, s)
	}
	if err := data.WriteShard(path, data.ShardGPT2, toks); err != nil {
		t.Fatal(err)
	}
	if err := data.WriteMask(data.MaskPath(path), labels, pad); err != nil {
		t.Fatal(err)
	}
	return out
}

// valStream writes n tokens as a plain shard and returns its windows of T
// targets, the last one shorter (inputs padded with 0, targets ignored).
func valStream(t *testing.T, path string, n, T, V int) []evalSample {
	t.Helper()
	toks := randomTokens(n, V)
	if err := data.WriteShard(path, data.ShardGPT2, toks); err != nil {
		t.Fatal(err)
	}
	var out []evalSample
	for k := 0; k < n-1; k += T {
		s := evalSample{make([]int32, T), make([]int32, T)}
		for i := range T {
			s.tg[i] = data.IgnoreTarget
			if k+i+1 < n {
				s.in[i], s.tg[i] = toks[k+i], toks[k+i+1]
			}
		}
		out = append(out, s)
	}
	return out
}

// The defect: validation scored ⌊samples/(B·N)⌋·B·N samples (two of ten
// rows never, with micro-batch 4 on two ranks) and a split smaller than
// one micro-step on all ranks was refused. The val loss must be the
// token-weighted mean over every row or token window of the split, each
// forwarded alone by an independent model — on one rank and on two at
// ZeRO-3, with the micro-batch as the eval batch or another, partial last
// batches included — and a cap of N batches must change it.
func TestValLossScoresEverySampleOnce(t *testing.T) {
	f := loadFamilyFixture(t, "qwen2_bias")
	T, V := f.seqLen, f.model.V
	for _, kind := range []string{"rows", "stream"} {
		t.Run(kind, func(t *testing.T) {
			valDir := t.TempDir()
			val := filepath.Join(valDir, "val_000000.bin")
			var samples []evalSample
			if kind == "rows" {
				samples = valRows(t, val, T, V)
			} else {
				samples = valStream(t, val, 77, T, V) // 76 targets: 9 windows of 8 and one of 4
			}
			want := referenceValLoss(t, f.dir, T, samples)
			for _, c := range []struct{ world, micro, evalBatch, cap int }{
				{1, 4, 0, 0}, {2, 4, 0, 0}, {2, 8, 0, 0}, {2, 4, 3, 0}, {1, 2, 1, 0},
			} {
				t.Run(fmt.Sprintf("N%d-B%d-E%d", c.world, c.micro, c.evalBatch), func(t *testing.T) {
					out, err := f.runErr(t, t.TempDir(), c.world, 1, layout(c.micro, 1, 3), func(o *trainer.Options) {
						o.ValData, o.EvalBatchSize, o.EvalBatches = []string{val}, c.evalBatch, c.cap
					})
					if err != nil {
						t.Fatal(err)
					}
					if got := firstValLoss(t, out); math.Abs(got-want) > 1e-5*want {
						t.Errorf("val loss %.7f, the mean over every sample scored alone %.7f", got, want)
					}
				})
			}
			// A cap of one batch scores a part of the split only.
			out, err := f.runErr(t, t.TempDir(), 1, 1, layout(2, 1, 0), func(o *trainer.Options) {
				o.ValData, o.EvalBatches = []string{val}, 1
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := firstValLoss(t, out); math.Abs(got-want) < 1e-4*want {
				t.Errorf("a one-batch cap gave the whole split's val loss %.7f", got)
			}
		})
	}
}
