package launch

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestShellQuoteThroughShell(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("sh is needed to check quoting: %v", err)
	}
	words := []string{"", "plain", "a b", "it's", `"dq"`, "$HOME", "`id`", "a\\b", "x;y&z|w", "*", "~", "=x", "new\nline", "tab\there", "--flag=v", "a=b=c", "ünï"}
	script := "set -- " + ShellJoin(words) + `; for w in "$@"; do printf '%s\0' "$w"; done`
	out, err := exec.Command(sh, "-c", script).Output()
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if !reflect.DeepEqual(got, words) {
		t.Fatalf("sh saw %q, want %q", got, words)
	}
	for _, w := range []string{"plain", "--nodes", "a/b.c", "host:0,1", "--kill-on-bad-exit=1", "NCCL_DEBUG=INFO"} {
		if ShellQuote(w) != w {
			t.Errorf("ShellQuote(%q) = %q, want it unquoted", w, ShellQuote(w))
		}
	}
	if ShellQuote("=x") != "'=x'" {
		t.Errorf("a leading '=' must be quoted: %s", ShellQuote("=x"))
	}
}

func sshTestJob() SSHJob {
	return SSHJob{
		Nodes:        []Node{{"worker-0", []int{0, 1}}, {"worker-1", []int{0, 2}}},
		RemoteBinary: "/opt/gotrain/bin/gotrain",
		Dir:          "/shared/my run",
		Env:          []string{"NCCL_DEBUG=INFO", "GOTRAIN_NOTE=it's"},
		JobEnv:       []string{JobIDEnv + "=0123456789abcdef", JobSecretEnv + "=" + strings.Repeat("ab", 32)}, // sorted, as ReadStdinEnv returns them
		Args:         []string{"train", "--config", "ds config.json"},
		MasterAddr:   "worker-0",
		MasterPort:   29500,
		GracePeriod:  5 * time.Second,
		LogDir:       "logs",
		SSHPort:      2222,
		SSHArgs:      []string{"-o", "ConnectTimeout=10"},
	}
}

func TestBuildSSHCommands(t *testing.T) {
	j := sshTestJob()
	cmds, err := BuildSSHCommands(j)
	if err != nil {
		t.Fatal(err)
	}
	// The world info is the JSON of the nodes in URL-safe base64; it is
	// checked by decoding, independent of the encoder's spelling.
	const world = "W3siaG9zdCI6Indvcmtlci0wIiwic2xvdHMiOlswLDFdfSx7Imhvc3QiOiJ3b3JrZXItMSIsInNsb3RzIjpbMCwyXX1d"
	nodes, err := DecodeWorldInfo(world)
	if err != nil || !reflect.DeepEqual(nodes, j.Nodes) {
		t.Fatalf("expected world info decodes to %v, %v", nodes, err)
	}
	want := []Command{
		{Label: "node 0 (worker-0)", Argv: []string{"ssh", "-o", "BatchMode=yes", "-p", "2222", "-o", "ConnectTimeout=10", "worker-0",
			`cd '/shared/my run' && export NCCL_DEBUG=INFO 'GOTRAIN_NOTE=it'\''s' && exec /opt/gotrain/bin/gotrain launch --launcher local --world_info ` + world +
				` --node_rank 0 --master_addr worker-0 --master_port 29500 --grace-period 5s --log-dir logs --stdin-job-env --stdin-lifeline train --config 'ds config.json'`}},
		{Label: "node 1 (worker-1)", Argv: []string{"ssh", "-o", "BatchMode=yes", "-p", "2222", "-o", "ConnectTimeout=10", "worker-1",
			`cd '/shared/my run' && export NCCL_DEBUG=INFO 'GOTRAIN_NOTE=it'\''s' && exec /opt/gotrain/bin/gotrain launch --launcher local --world_info ` + world +
				` --node_rank 1 --master_addr worker-0 --master_port 29500 --grace-period 5s --log-dir logs --stdin-job-env --stdin-lifeline train --config 'ds config.json'`}},
	}
	if len(cmds) != len(want) {
		t.Fatalf("got %d commands", len(cmds))
	}
	wantRanks := [][]int{{0, 1}, {2, 3}}
	for i := range want {
		if cmds[i].Label != want[i].Label || !reflect.DeepEqual(cmds[i].Argv, want[i].Argv) {
			t.Errorf("command %d:\n got %q\nwant %q", i, cmds[i].Argv, want[i].Argv)
		}
		if !reflect.DeepEqual(cmds[i].Ranks, wantRanks[i]) || !cmds[i].StopByStdin {
			t.Errorf("command %d: ranks %v, stop by stdin %v; want %v, true", i, cmds[i].Ranks, cmds[i].StopByStdin, wantRanks[i])
		}
		env, err := ReadStdinEnv(bufio.NewReader(strings.NewReader(cmds[i].Stdin)))
		if err != nil || !reflect.DeepEqual(env, j.JobEnv) {
			t.Errorf("command %d: stdin carries %v, %v; want %v", i, env, err, j.JobEnv)
		}
	}

	// Minimal job: no env, no log dir, default grace, no ssh options.
	j2 := SSHJob{Nodes: []Node{{"h", []int{0}}}, RemoteBinary: "gotrain", Dir: "/w", Args: []string{"train"}, MasterAddr: "h", MasterPort: 1,
		JobEnv: []string{JobSecretEnv + "=s"}}
	cmds, err = BuildSSHCommands(j2)
	if err != nil {
		t.Fatal(err)
	}
	w2 := EncodeWorldInfo(j2.Nodes)
	wantArgv := []string{"ssh", "-o", "BatchMode=yes", "h",
		"cd /w && exec gotrain launch --launcher local --world_info " + w2 + " --node_rank 0 --master_addr h --master_port 1 --grace-period 10s --stdin-job-env --stdin-lifeline train"}
	if !reflect.DeepEqual(cmds[0].Argv, wantArgv) {
		t.Errorf("minimal:\n got %q\nwant %q", cmds[0].Argv, wantArgv)
	}
}

// TestSSHRemoteScriptRuns runs the remote half of an ssh command line with
// sh, the way sshd would, against the test binary standing in for gotrain,
// and checks the working directory, the exported variables and the argv
// gotrain would see.
func TestSSHRemoteScriptRuns(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "my run")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "report")
	j := sshTestJob()
	j.RemoteBinary = exe
	j.Dir = dir
	j.Env = []string{helperEnv + "=args", helperDirEnv + "=" + report, `NCCL_TRICKY=a 'b' "c" $HOME; d`}
	cmds, err := BuildSSHCommands(j)
	if err != nil {
		t.Fatal(err)
	}
	script := cmds[1].Argv[len(cmds[1].Argv)-1]
	if out, err := exec.Command("sh", "-c", script).CombinedOutput(); err != nil {
		t.Fatalf("remote script failed: %v\n%s", err, out)
	}
	got := readArgsReport(t, report)
	wantArgs := []string{"launch", "--launcher", "local", "--world_info", EncodeWorldInfo(j.Nodes), "--node_rank", "1",
		"--master_addr", "worker-0", "--master_port", "29500", "--grace-period", "5s", "--log-dir", "logs",
		"--stdin-job-env", "--stdin-lifeline", "train", "--config", "ds config.json"}
	if !reflect.DeepEqual(got.Args, wantArgs) {
		t.Errorf("args:\n got %q\nwant %q", got.Args, wantArgs)
	}
	if got.Dir != dir {
		t.Errorf("cwd %q, want %q", got.Dir, dir)
	}
	if v := got.Env["NCCL_TRICKY"]; v != `a 'b' "c" $HOME; d` {
		t.Errorf("NCCL_TRICKY arrived as %q", v)
	}
}

func TestBuildSSHCommandsErrors(t *testing.T) {
	for name, mod := range map[string]func(*SSHJob){
		"no nodes":    func(j *SSHJob) { j.Nodes = nil },
		"no args":     func(j *SSHJob) { j.Args = nil },
		"no dir":      func(j *SSHJob) { j.Dir = "" },
		"bad env":     func(j *SSHJob) { j.Env = []string{"1BAD=x"} },
		"env no =":    func(j *SSHJob) { j.Env = []string{"NCCL"} },
		"no master":   func(j *SSHJob) { j.MasterAddr = "" },
		"bad port":    func(j *SSHJob) { j.MasterPort = 0 },
		"no binary":   func(j *SSHJob) { j.RemoteBinary = "" },
		"port > 2^16": func(j *SSHJob) { j.MasterPort = 1 << 16 },
		"secret on the command line": func(j *SSHJob) {
			j.Env = append(j.Env, JobSecretEnv+"=x")
		},
		"no secret":     func(j *SSHJob) { j.JobEnv = nil },
		"secret > pipe": func(j *SSHJob) { j.JobEnv = []string{JobSecretEnv + "=" + strings.Repeat("x", maxStdinEnv)} },
	} {
		j := sshTestJob()
		mod(&j)
		if _, err := BuildSSHCommands(j); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestWorldInfoRoundTrip(t *testing.T) {
	nodes := []Node{{"a", []int{0, 3}}, {"b-1.example", []int{1}}}
	got, err := DecodeWorldInfo(EncodeWorldInfo(nodes))
	if err != nil || !reflect.DeepEqual(got, nodes) {
		t.Fatalf("round trip = %v, %v", got, err)
	}
	for _, bad := range []string{"!!", "bnVsbA", "W10", "W3siaG9zdCI6ImEiLCJzbG90cyI6W119XQ"} { // garbage, null, [], [{"host":"a","slots":[]}]
		if _, err := DecodeWorldInfo(bad); err == nil || !strings.Contains(err.Error(), "--world_info") {
			t.Errorf("%q: error %v", bad, err)
		}
	}
}

func TestForwardedEnv(t *testing.T) {
	environ := []string{"PATH=/bin", "NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=^lo", "UCX_TLS=rc", "GOTRAIN_X=1",
		JobSecretEnv + "=never on argv", JobIDEnv + "=nor this",
		"OMP_NUM_THREADS=4", "OPENBLAS_CORETYPE=Haswell", "CUDA_VISIBLE_DEVICES=0,1", "HOME=/root", "OMPI_X=1", "BASH_FUNC_x%%=() {"}
	got := ForwardedEnv(environ)
	want := []string{"NCCL_DEBUG=INFO", "NCCL_SOCKET_IFNAME=^lo", "UCX_TLS=rc", "GOTRAIN_X=1", "OMP_NUM_THREADS=4", "OPENBLAS_CORETYPE=Haswell"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestEnvFiles(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(home, ".deepspeed_env"), "NCCL_DEBUG=WARN\nA=home\n")
	write(filepath.Join(cwd, ".gotrain_env"), "# comment\n\nexport A=cwd\nB=x=y 'q'\n")
	paths := EnvFilePaths(home, cwd)
	wantPaths := []string{filepath.Join(home, ".deepspeed_env"), filepath.Join(home, ".gotrain_env"),
		filepath.Join(cwd, ".deepspeed_env"), filepath.Join(cwd, ".gotrain_env")}
	if !reflect.DeepEqual(paths, wantPaths) {
		t.Fatalf("paths %v", paths)
	}
	if p := EnvFilePaths(home, home); len(p) != 2 {
		t.Fatalf("same home and cwd read twice: %v", p)
	}
	env, err := ReadEnvFiles(paths)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"NCCL_DEBUG=WARN", "A=cwd", "B=x=y 'q'"}; !reflect.DeepEqual(env, want) {
		t.Fatalf("env %v, want %v", env, want)
	}
	bad := filepath.Join(cwd, ".deepspeed_env")
	write(bad, "OK=1\nnot a pair\n")
	_, err = ReadEnvFiles([]string{bad})
	if err == nil || !strings.Contains(err.Error(), bad+" line 2") || !strings.Contains(err.Error(), "not KEY=VALUE") {
		t.Fatalf("bad env file: %v", err)
	}
}

func TestBuildSrunCommand(t *testing.T) {
	got, err := BuildSrunCommand(SrunJob{NumNodes: 2, TasksPerNode: 4, Binary: "/usr/bin/gotrain", Args: []string{"train", "--config", "ds.json"}})
	want := []string{"srun", "--nodes=2", "--ntasks-per-node=4", "--kill-on-bad-exit=1", "/usr/bin/gotrain", "train", "--config", "ds.json"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	got, err = BuildSrunCommand(SrunJob{NumNodes: 1, TasksPerNode: 2, Include: "n1@n3", ExtraArgs: []string{"--gpus-per-node=2"}, Binary: "g", Args: []string{"train"}})
	want = []string{"srun", "--nodes=1", "--ntasks-per-node=2", "--kill-on-bad-exit=1", "--nodelist=n1,n3", "--gpus-per-node=2", "g", "train"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	got, err = BuildSrunCommand(SrunJob{NumNodes: 3, TasksPerNode: 1, Exclude: "bad7", Binary: "g", Args: []string{"train"}})
	want = []string{"srun", "--nodes=3", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--exclude=bad7", "g", "train"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	for name, j := range map[string]SrunJob{
		"slots":        {NumNodes: 1, TasksPerNode: 1, Include: "n1:0", Binary: "g", Args: []string{"train"}},
		"both filters": {NumNodes: 1, TasksPerNode: 1, Include: "a", Exclude: "b", Binary: "g", Args: []string{"train"}},
		"no nodes":     {TasksPerNode: 1, Binary: "g", Args: []string{"train"}},
		"no args":      {NumNodes: 1, TasksPerNode: 1, Binary: "g"},
	} {
		if _, err := BuildSrunCommand(j); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestGenerateSbatch(t *testing.T) {
	got, err := GenerateSbatch(SbatchSpec{JobName: "gpt2-zero3", Nodes: 4, GPUsPerNode: 8, CPUsPerTask: 8, MemPerGPU: "32G", Binary: "gotrain",
		Time: "48:00:00", Partition: "gpu", TrainArgs: []string{"--config", "ds zero3.json", "--model", "gpt2"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		"#!/bin/bash\n",
		"\n#SBATCH --job-name=gpt2-zero3\n",
		"\n#SBATCH --nodes=4\n",
		"\n#SBATCH --ntasks-per-node=8\n",
		"\n#SBATCH --gres=gpu:8\n",
		"\n#SBATCH --cpus-per-task=8\n",
		"\n#SBATCH --mem-per-gpu=32G\n",
		"\n#SBATCH --time=48:00:00\n",
		"\n#SBATCH --partition=gpu\n",
		"\n  MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n",
		"\nexport MASTER_PORT=${MASTER_PORT:-29500}\n",
		"\n# export NCCL_SOCKET_IFNAME=^lo,docker0\n",
		"\nsrun --kill-on-bad-exit=1 gotrain train --config 'ds zero3.json' --model gpt2\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("script lacks %q:\n%s", line, got)
		}
	}
	// #SBATCH lines are read only before the first command.
	if strings.Index(got, "#SBATCH --error") > strings.Index(got, "set -eu") {
		t.Error("an #SBATCH line comes after the first command")
	}
	if out, err := exec.Command("bash", "-n", "-c", got).CombinedOutput(); err != nil {
		t.Fatalf("bash -n: %v\n%s", err, out)
	}

	cpu, err := GenerateSbatch(SbatchSpec{Nodes: 2, TasksPerNode: 4, Binary: "/opt/gotrain", MasterPort: 30000})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"--job-name=gotrain\n", "--ntasks-per-node=4\n", "MASTER_PORT:-30000}", "srun --kill-on-bad-exit=1 /opt/gotrain train\n"} {
		if !strings.Contains(cpu, s) {
			t.Errorf("cpu script lacks %q", s)
		}
	}
	if strings.Contains(cpu, "--gres") || strings.Contains(cpu, "--time") || strings.Contains(cpu, "--partition") {
		t.Errorf("cpu script has headers nobody asked for:\n%s", cpu)
	}

	for name, s := range map[string]SbatchSpec{
		"no nodes":      {GPUsPerNode: 1},
		"no tasks":      {Nodes: 1},
		"bad job name":  {Nodes: 1, GPUsPerNode: 1, JobName: "a b"},
		"injected time": {Nodes: 1, GPUsPerNode: 1, Time: "1:00\nrm -rf ~"},
		"bad port":      {Nodes: 1, GPUsPerNode: 1, MasterPort: 70000, Binary: "g"},
		"no binary":     {Nodes: 1, GPUsPerNode: 1},
	} {
		if _, err := GenerateSbatch(s); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
