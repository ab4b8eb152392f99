package main

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
)

// commFaultEnv makes rank 1 of a launched test binary run doctor --comm
// through faultyComm: "corrupt" adds 1 to one element of every result of
// 256 elements or more, "stall" sleeps past the deadline before its first
// all-reduce. It is read by TestMain, so only test binaries honour it.
const commFaultEnv = "GOTRAIN_TEST_COMM_FAULT"

// faultyDoctorMain is gotrain with doctor --comm's Comm wrapped by
// faultyComm; it returns the exit status.
func faultyDoctorMain(mode string) int {
	app := newApp(os.Stdout, os.Stderr)
	doctor := app.Command("doctor")
	doctor.Action = func(c *cli.Context) error {
		return runDoctorComm(c, doctorCommOptions{wrap: func(cm comm.Comm, be backend.Backend) comm.Comm {
			return &faultyComm{Comm: cm, be: be, mode: mode}
		}})
	}
	if err := app.RunContext(context.Background(), normalizeArgs(os.Args)); err != nil {
		fmt.Fprintln(os.Stderr, "gotrain:", err)
		return 1
	}
	return 0
}

// faultyComm is a rank that gets collectives wrong.
type faultyComm struct {
	comm.Comm
	be      backend.Backend
	mode    string
	stalled bool
}

func (f *faultyComm) spoil(buf backend.Buffer) error {
	if f.mode != "corrupt" || buf.Len() < 256 {
		return nil
	}
	v, err := backend.ReadF32(f.be, buf)
	if err != nil {
		return err
	}
	v[3]++
	return backend.WriteF32(f.be, buf, v)
}

func (f *faultyComm) AllReduce(ctx context.Context, buf backend.Buffer, op comm.Op) error {
	if f.mode == "stall" && !f.stalled {
		f.stalled = true
		dl, _ := ctx.Deadline()
		time.Sleep(time.Until(dl) + 2*time.Second)
	}
	if err := f.Comm.AllReduce(ctx, buf, op); err != nil {
		return err
	}
	return f.spoil(buf)
}

func (f *faultyComm) AllGather(ctx context.Context, dst, src backend.Buffer) error {
	if err := f.Comm.AllGather(ctx, dst, src); err != nil {
		return err
	}
	return f.spoil(dst)
}

func (f *faultyComm) ReduceScatter(ctx context.Context, dst, src backend.Buffer, op comm.Op) error {
	if err := f.Comm.ReduceScatter(ctx, dst, src, op); err != nil {
		return err
	}
	return f.spoil(dst)
}

func (f *faultyComm) Broadcast(ctx context.Context, buf backend.Buffer, root int) error {
	if err := f.Comm.Broadcast(ctx, buf, root); err != nil {
		return err
	}
	return f.spoil(buf)
}

// commRow is a result line: size, count, time, algbw, busbw, #wrong.
var commRow = regexp.MustCompile(`(?m)^\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$`)

// TestDoctorComm: on 2 launched CPU ranks, every collective at every size
// is exact, and each line's bus bandwidth is its algorithm bandwidth times
// nccl-tests' factor for 2 ranks (all-reduce 2(n−1)/n = 1, all-gather and
// reduce-scatter (n−1)/n = 1/2, broadcast 1) and its algorithm bandwidth
// its size over its time. A rank whose results are corrupted, or that
// stalls past the deadline, fails the command, naming rank 1.
func TestDoctorComm(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"launch", "--nproc", "2", "--master_port", "0", "doctor", "--comm", "--comm-sizes", "8B,4KiB,256KiB", "--comm-iters", "2", "--device", "cpu"}
	b, err := gotrainCmd(ctx, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("doctor --comm: %v\n%s", err, b)
	}
	out := string(b)
	sections := strings.Split(out, "\n#\n# ")
	if len(sections) != 5 {
		t.Fatalf("want 4 collective sections:\n%s", out)
	}
	factors := map[string]float64{"all-reduce": 1, "all-gather": 0.5, "reduce-scatter": 0.5, "broadcast": 1}
	for _, sec := range sections[1:] {
		name, _, _ := strings.Cut(sec, "\n")
		f, ok := factors[name]
		if !ok {
			t.Fatalf("unknown section %q", name)
		}
		rows := commRow.FindAllStringSubmatch(sec, -1)
		if len(rows) != 3 {
			t.Fatalf("%s: %d rows, want 3:\n%s", name, len(rows), sec)
		}
		for i, r := range rows {
			v := make([]float64, 6)
			for j := range v {
				v[j], _ = strconv.ParseFloat(r[j+1], 64)
			}
			if want := []float64{8, 4096, 262144}[i]; v[0] != want || v[1] != want/4 {
				t.Errorf("%s row %d: size %v count %v, want %v and %v", name, i, v[0], v[1], want, want/4)
			}
			if v[5] != 0 {
				t.Errorf("%s: %v wrong elements", name, v[5])
			}
			// Printed to 0.1 us and 0.001 GB/s: compare within that rounding.
			if alg := v[0] / (v[2] * 1e-6) / 1e9; v[2] > 0 && absf(alg-v[3]) > 0.0006+alg*0.051/v[2] {
				t.Errorf("%s %v B: algbw %v GB/s, size/time %v", name, v[0], v[3], alg)
			}
			if absf(v[4]-f*v[3]) > 0.0011 {
				t.Errorf("%s %v B: busbw %v, want %v × algbw %v", name, v[0], v[4], f, v[3])
			}
		}
	}
	if !strings.Contains(out, "all results exact on all 2 ranks") {
		t.Errorf("no verdict:\n%s", out)
	}

	for _, tc := range []struct{ mode, want string }{
		{"corrupt", "all-reduce of 4096 bytes gave wrong results on rank 1"},
		{"stall", "waiting for rank 1"},
	} {
		cmd := gotrainCmd(ctx, append(args, "--comm-timeout", "2s")...)
		cmd.Env = append(cmd.Env, commFaultEnv+"="+tc.mode)
		b, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: doctor --comm passed:\n%s", tc.mode, b)
			continue
		}
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: output lacks %q:\n%s", tc.mode, tc.want, b)
		}
	}
}

func absf(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
