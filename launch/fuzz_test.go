package launch

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// FuzzParseHostfile: any bytes give nodes or an error, never a panic or an
// allocation the input did not ask for; accepted nodes are well formed and
// survive a round trip through the hostfile format.
func FuzzParseHostfile(f *testing.F) {
	for _, seed := range []string{
		"worker-1 slots=4\nworker-2 slots=4\n",
		"# cluster A\n\n  worker-1   slots=2  # fast node\n\t\nworker-2\tslots=1\n",
		"n1 slots=2 max_slots=8\n",
		"root@10.0.0.5 slots=3",
		"a slots=1\na slots=2\n",
		"a slots=99999999999999999999\n",
		"a slots=4096\nb slots=4097\n",
		"slots=4 worker-0\n",
		"a slots=0\n",
		"\x00 slots=1\r\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		nodes, err := ParseHostfile("fuzz", strings.NewReader(text))
		if err != nil {
			if !strings.Contains(err.Error(), "hostfile fuzz") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		if len(nodes) == 0 {
			t.Fatal("no error and no nodes")
		}
		var b strings.Builder
		seen := map[string]bool{}
		for _, n := range nodes {
			if n.Host == "" || strings.ContainsAny(n.Host, " \t\n#=") || seen[n.Host] {
				t.Fatalf("bad or repeated host %q", n.Host)
			}
			seen[n.Host] = true
			if len(n.Slots) < 1 || len(n.Slots) > MaxSlots {
				t.Fatalf("host %s has %d slots", n.Host, len(n.Slots))
			}
			for i, s := range n.Slots {
				if s != i {
					t.Fatalf("host %s slots %v are not 0..n-1", n.Host, n.Slots)
				}
			}
			fmt.Fprintf(&b, "%s slots=%d\n", n.Host, len(n.Slots))
		}
		again, err := ParseHostfile("fuzz", strings.NewReader(b.String()))
		if err != nil || !reflect.DeepEqual(again, nodes) {
			t.Fatalf("round trip of %q: %v, %v; want %v", b.String(), again, err, nodes)
		}
	})
}

// FuzzDetectRank: any environment (KEY=VALUE lines) gives a rank, "no
// launcher", or an error, never a panic or a runaway allocation; a
// detected rank is consistent, and its MASTER_ADDR is a host a rank can
// dial.
func FuzzDetectRank(f *testing.F) {
	for _, env := range []map[string]string{
		{"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29501"},
		{"RANK": "6", "WORLD_SIZE": "8", "LOCAL_RANK": "2", "LOCAL_SIZE": "4", "MASTER_ADDR": "root@h0"},
		{"RANK": "0", "WORLD_SIZE": "1"},
		{"SLURM_PROCID": "5", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
			"SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "gpu[07-08]"},
		{"SLURM_PROCID": "8", "SLURM_STEPID": "3", "SLURM_NTASKS": "16", "SLURM_STEP_NUM_TASKS": "9", "SLURM_LOCALID": "0",
			"SLURM_NODEID": "2", "SLURM_STEP_TASKS_PER_NODE": "4(x2),1", "SLURM_STEP_NODELIST": "a[1-3]b[0-65535]", "MASTER_PORT": "12345"},
		{"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "[::1]"},
		{"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1", "MASTER_ADDR": "m:6000"},
		{"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "16", "SLURM_JOB_NODELIST": "n[1-2]"},
	} {
		var b strings.Builder
		for k, v := range env {
			fmt.Fprintf(&b, "%s=%s\n", k, v)
		}
		f.Add(b.String())
	}
	f.Fuzz(func(t *testing.T, text string) {
		env := map[string]string{}
		for line := range strings.SplitSeq(text, "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				env[k] = v
			}
		}
		get := func(k string) string { return env[k] }
		r, ok, err := DetectRank(get)
		r2, ok2, err2 := DetectRank(get)
		if r != r2 || ok != ok2 || (err == nil) != (err2 == nil) {
			t.Fatalf("two calls disagree: %+v %v %v / %+v %v %v", r, ok, err, r2, ok2, err2)
		}
		if err != nil {
			if !ok {
				t.Fatalf("error %v without a detected launcher", err)
			}
			return
		}
		if !ok {
			if want := (Rank{WorldSize: 1, LocalWorldSize: 1, MasterAddr: "127.0.0.1", MasterPort: DefaultMasterPort}); r != want {
				t.Fatalf("no launcher but %+v", r)
			}
			return
		}
		switch {
		case r.WorldSize < 1 || r.Rank < 0 || r.Rank >= r.WorldSize:
			t.Fatalf("rank %d of %d", r.Rank, r.WorldSize)
		case r.LocalWorldSize < 1 || r.LocalWorldSize > r.WorldSize || r.LocalRank < 0 || r.LocalRank >= r.LocalWorldSize || r.LocalRank > r.Rank:
			t.Fatalf("local rank %d of %d (rank %d of %d)", r.LocalRank, r.LocalWorldSize, r.Rank, r.WorldSize)
		case r.NodeRank < 0:
			t.Fatalf("node rank %d", r.NodeRank)
		case r.MasterPort < 1 || r.MasterPort > 65535:
			t.Fatalf("master port %d", r.MasterPort)
		case r.Source == SourceNone:
			t.Fatal("detected, but from no source")
		}
		if err := ValidateMasterAddr(r.MasterAddr); err != nil {
			t.Fatalf("accepted master address: %v", err)
		}
	})
}
