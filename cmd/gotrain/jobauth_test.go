package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gotrain/gotrain/backend"
	"github.com/gotrain/gotrain/comm"
	"github.com/gotrain/gotrain/config"
	"github.com/gotrain/gotrain/launch"
	"github.com/gotrain/gotrain/model"
	"github.com/gotrain/gotrain/trainer"
)

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

var authFields = []comm.Field{{Name: "version", Value: "dev"}, {Name: "seq_len", Value: "64"}}

func TestJobAuthOrder(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "secret")
	os.WriteFile(file, []byte(strings.Repeat("f", 64)+"\nignored second line\n"), 0o600)
	torch := launch.Rank{Rank: 0, WorldSize: 2, MasterAddr: "node-a", MasterPort: 29500, Source: launch.SourceEnv}
	srun := launch.Rank{Rank: 0, WorldSize: 2, MasterAddr: "node-a", MasterPort: 29500, Source: launch.SourceSlurm}
	given := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name    string
		env     map[string]string
		rk      launch.Rank
		secret  string // "" when derived
		job     string
		derived bool
		line    string
	}{
		{"launcher secret wins", map[string]string{"GOTRAIN_JOB_SECRET": given, "GOTRAIN_JOB_SECRET_FILE": file, "SLURM_JOB_ID": "77", "GOTRAIN_JOB_ID": "j1"},
			torch, given, "j1", false, "info: job secret from GOTRAIN_JOB_SECRET; job id j1"},
		{"secret file", map[string]string{"GOTRAIN_JOB_SECRET_FILE": file, "SLURM_JOB_ID": "77"},
			torch, strings.Repeat("f", 64), "77", false, "info: job secret from GOTRAIN_JOB_SECRET_FILE " + file + "; job id 77"},
		{"slurm step", map[string]string{"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3"},
			srun, "", "77.3", true, "info: job secret derived from SLURM_JOB_ID=77, step 3 and the run's settings (guessable"},
		{"mpirun in an allocation: no step", map[string]string{"SLURM_JOB_ID": "77", "SLURM_STEP_ID": "3"},
			torch, "", "77", true, "info: job secret derived from SLURM_JOB_ID=77 and the run's settings"},
		{"by hand", map[string]string{},
			torch, "", "port-29500", true, "warning: no GOTRAIN_JOB_SECRET: the job secret was derived from MASTER_PORT=29500 and the run's settings"},
	} {
		a, err := resolveJobAuth(envOf(tc.env), tc.rk, authFields)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if (tc.secret != "" && string(a.secret) != tc.secret) || len(a.secret) < minSecretLen || a.jobID != tc.job || a.derived != tc.derived {
			t.Errorf("%s: secret %q, job %q, derived %v", tc.name, a.secret, a.jobID, a.derived)
		}
		if !strings.HasPrefix(a.describe(), tc.line) {
			t.Errorf("%s: rank 0 says %q, want it to start %q", tc.name, a.describe(), tc.line)
		}
		if a.derived && !strings.Contains(a.hint, "likely cause is that this rank was started with different settings") {
			t.Errorf("%s: hint %q", tc.name, a.hint)
		}
	}
}

// TestDerivedSecretDependsOnSettingsNotAddress: every rank of a job derives
// the same secret whatever name it uses for rank 0's host; other settings or
// another Slurm job derive another.
func TestDerivedSecretDependsOnSettingsNotAddress(t *testing.T) {
	rk := launch.Rank{WorldSize: 2, MasterAddr: "node-a", MasterPort: 29500}
	derive := func(env map[string]string, rk launch.Rank, f []comm.Field) []byte {
		t.Helper()
		a, err := resolveJobAuth(envOf(env), rk, f)
		if err != nil {
			t.Fatal(err)
		}
		return a.secret
	}
	base := derive(nil, rk, authFields)
	other := rk
	other.MasterAddr = "10.0.0.5"
	if !bytes.Equal(base, derive(nil, other, authFields)) {
		t.Error("the secret depends on how MASTER_ADDR is spelled")
	}
	other = rk
	other.MasterPort = 29501
	if bytes.Equal(base, derive(nil, other, authFields)) {
		t.Error("another port derives the same secret")
	}
	changed := []comm.Field{{Name: "version", Value: "dev"}, {Name: "seq_len", Value: "128"}}
	if bytes.Equal(base, derive(nil, rk, changed)) {
		t.Error("other settings derive the same secret")
	}
	s1 := derive(map[string]string{"SLURM_JOB_ID": "1"}, rk, authFields)
	if bytes.Equal(s1, derive(map[string]string{"SLURM_JOB_ID": "2"}, rk, authFields)) || bytes.Equal(s1, base) {
		t.Error("Slurm jobs share a secret")
	}
}

func TestJobAuthRefusesWeakOrOddInput(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short")
	os.WriteFile(short, []byte("hunter2\n"), 0o600)
	open := filepath.Join(dir, "open")
	os.WriteFile(open, []byte(strings.Repeat("c", 40)), 0o644)
	big := filepath.Join(dir, "big")
	os.WriteFile(big, bytes.Repeat([]byte("d"), maxSecretFile+10), 0o600)
	rk := launch.Rank{WorldSize: 2, MasterAddr: "127.0.0.1", MasterPort: 29500}
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{"GOTRAIN_JOB_SECRET": "hunter2"}, "GOTRAIN_JOB_SECRET is 7 characters long; use at least 32 random ones: export GOTRAIN_JOB_SECRET=$(openssl rand -hex 32)"},
		{map[string]string{"GOTRAIN_JOB_SECRET_FILE": short}, "holds 7 characters; use at least 32"},
		{map[string]string{"GOTRAIN_JOB_SECRET_FILE": filepath.Join(dir, "missing")}, "GOTRAIN_JOB_SECRET_FILE: stat "},
		{map[string]string{"GOTRAIN_JOB_SECRET_FILE": big}, "is over 4096 bytes"},
		{map[string]string{"GOTRAIN_JOB_ID": "a\nb"}, "holds a control character"},
		{map[string]string{"GOTRAIN_JOB_ID": strings.Repeat("x", comm.MaxJobIDLen+1)}, "GOTRAIN_JOB_ID is 129 characters long; at most 128"},
	} {
		_, err := resolveJobAuth(envOf(tc.env), rk, authFields)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
	}
	a, err := resolveJobAuth(envOf(map[string]string{"GOTRAIN_JOB_SECRET_FILE": open}), rk, authFields)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.warnings) != 1 || !strings.Contains(a.warnings[0], "can be read by other users (mode 0644); chmod 600 it") {
		t.Fatalf("warnings %q", a.warnings)
	}
}

// gpuNamed is a backend that only says which GPU it runs on.
type gpuNamed struct {
	backend.Backend
	name string
}

func (g gpuNamed) Name() string { return g.name }

// TestRankFieldsIgnoreWhichGPU: the fields compared at the join named each
// rank's own GPU (cuda:0, cuda:1), so two ranks of one job on different GPUs
// disagreed on "device", and with a derived secret could not even connect.
func TestRankFieldsIgnoreWhichGPU(t *testing.T) {
	_, _, shard := distFixture(t)
	cfg, err := config.Parse("ds.json", []byte(`{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1}`), config.Options{Strict: true})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := cfg.Resolve(2)
	if err != nil {
		t.Fatal(err)
	}
	mcfg, err := model.ByName("gpt2-tiny")
	if err != nil {
		t.Fatal(err)
	}
	o := trainer.Options{Config: cfg, Batch: batch, Model: mcfg, Data: []string{shard}, SeqLen: 16, MaxSteps: 2, OutputDir: "out", Version: "dev"}
	f0, err := jobFields(o, gpuNamed{name: "cuda:0"})
	if err != nil {
		t.Fatal(err)
	}
	f1, err := jobFields(o, gpuNamed{name: "cuda:1"})
	if err != nil {
		t.Fatal(err)
	}
	if d := trainer.DiffFields(f0, f1); len(d) != 0 {
		t.Fatalf("ranks on GPU 0 and GPU 1 disagree: %v", d)
	}
	fc, _ := jobFields(o, gpuNamed{name: "cpu"})
	if d := trainer.DiffFields(f0, fc); len(d) != 1 || d[0].String() != "device: cuda ≠ cpu" {
		t.Fatalf("a CPU rank and a GPU rank: %v", d)
	}
}
