package launch

import (
	"strings"
	"testing"
)

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDetectRank(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want Rank
	}{
		{"gotrain launch / torchrun", map[string]string{
			"RANK": "5", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "1",
			"MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29501"},
			Rank{5, 8, 1, 4, 1, "10.0.0.1", 29501, SourceEnv}},
		{"deepspeed names, node rank derived", map[string]string{
			"RANK": "6", "WORLD_SIZE": "8", "LOCAL_RANK": "2", "LOCAL_SIZE": "4", "MASTER_ADDR": "h0"},
			Rank{6, 8, 2, 4, 1, "h0", 29500, SourceEnv}},
		{"single process env without master", map[string]string{"RANK": "0", "WORLD_SIZE": "1"},
			Rank{0, 1, 0, 1, 0, "127.0.0.1", 29500, SourceEnv}},
		{"env wins over slurm", map[string]string{
			"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
			"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "1"},
			Rank{1, 2, 1, 2, 0, "127.0.0.1", 29500, SourceEnv}},
		{"srun with hostlist", map[string]string{
			"SLURM_PROCID": "5", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "8", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
			"SLURM_TASKS_PER_NODE": "4(x2)", "SLURM_JOB_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "42"},
			Rank{5, 8, 1, 4, 1, "gpu07", 29500, SourceSlurm}},
		{"srun step variables and uneven nodes", map[string]string{
			"SLURM_PROCID": "8", "SLURM_STEPID": "3", "SLURM_NTASKS": "16", "SLURM_STEP_NUM_TASKS": "9",
			"SLURM_LOCALID": "0", "SLURM_NODEID": "2", "SLURM_STEP_TASKS_PER_NODE": "4(x2),1",
			"SLURM_TASKS_PER_NODE": "8(x2)", "SLURM_STEP_NODELIST": "a[1-3]", "SLURM_JOB_NODELIST": "a[0-3]",
			"MASTER_PORT": "12345"},
			Rank{8, 9, 0, 1, 2, "a1", 12345, SourceSlurm}},
		{"srun with MASTER_ADDR and ntasks-per-node", map[string]string{
			"SLURM_PROCID": "3", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "4", "SLURM_LOCALID": "1", "SLURM_NODEID": "1",
			"SLURM_NTASKS_PER_NODE": "2", "SLURM_NODELIST": "x,y", "MASTER_ADDR": "10.1.1.1"},
			Rank{3, 4, 1, 2, 1, "10.1.1.1", 29500, SourceSlurm}},
		{"open mpi", map[string]string{
			"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_RANK": "1",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "node0"},
			Rank{3, 4, 1, 2, 1, "node0", 29500, SourceOpenMPI}},
		{"open mpi inside a slurm allocation", map[string]string{
			"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "0",
			"OMPI_COMM_WORLD_LOCAL_SIZE": "2", "MASTER_ADDR": "n", "SLURM_PROCID": "0", "SLURM_STEP_ID": "1"},
			Rank{0, 2, 0, 2, 0, "n", 29500, SourceOpenMPI}},
		{"mpich / intel mpi", map[string]string{
			"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0", "MPI_LOCALNRANKS": "1", "MASTER_ADDR": "m",
			"MASTER_PORT": "6000"},
			Rank{2, 3, 0, 1, 2, "m", 6000, SourcePMI}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok, err := DetectRank(mapEnv(tc.env))
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				t.Fatal("not detected")
			}
			if got != tc.want {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDetectRankNone(t *testing.T) {
	for name, env := range map[string]map[string]string{
		"empty": {},
		// sbatch's batch shell: an allocation but no job step.
		"batch shell": {"SLURM_JOB_ID": "7", "SLURM_PROCID": "0", "SLURM_NTASKS": "16", "SLURM_JOB_NODELIST": "n[1-2]"},
	} {
		got, ok, err := DetectRank(mapEnv(env))
		want := Rank{0, 1, 0, 1, 0, "127.0.0.1", 29500, SourceNone}
		if err != nil || ok || got != want {
			t.Errorf("%s: got %+v, %v, %v; want %+v, false, nil", name, got, ok, err, want)
		}
	}
}

func TestDetectRankErrors(t *testing.T) {
	full := func(over map[string]string) map[string]string {
		m := map[string]string{"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "h"}
		for k, v := range over {
			if v == "" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	slurm := func(over map[string]string) map[string]string {
		m := map[string]string{"SLURM_PROCID": "1", "SLURM_STEP_ID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "1",
			"SLURM_NODEID": "0", "SLURM_TASKS_PER_NODE": "2", "SLURM_JOB_NODELIST": "n1"}
		for k, v := range over {
			if v == "" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	tests := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"rank without world size", full(map[string]string{"WORLD_SIZE": ""}), []string{"WORLD_SIZE is not set", "torchrun"}},
		{"world size without rank", map[string]string{"WORLD_SIZE": "2"}, []string{"RANK is not set"}},
		{"rank too large", full(map[string]string{"RANK": "2"}), []string{"RANK=2 is not below WORLD_SIZE=2", "0 to 1"}},
		{"non-numeric rank", full(map[string]string{"RANK": "one"}), []string{`RANK="one" is not a non-negative whole number`}},
		{"negative world", full(map[string]string{"WORLD_SIZE": "-2"}), []string{"WORLD_SIZE"}},
		{"zero world", full(map[string]string{"RANK": "0", "WORLD_SIZE": "0"}), []string{"WORLD_SIZE=0"}},
		{"missing local rank", full(map[string]string{"LOCAL_RANK": ""}), []string{"LOCAL_RANK is not set"}},
		{"missing local size", full(map[string]string{"LOCAL_WORLD_SIZE": ""}), []string{"LOCAL_WORLD_SIZE is not set"}},
		{"local rank too large", full(map[string]string{"LOCAL_RANK": "2", "RANK": "1"}), []string{"LOCAL_RANK=2 is not below LOCAL_WORLD_SIZE=2"}},
		{"local size above world", full(map[string]string{"LOCAL_WORLD_SIZE": "3"}), []string{"LOCAL_WORLD_SIZE=3 exceeds WORLD_SIZE=2"}},
		{"no master", full(map[string]string{"MASTER_ADDR": ""}), []string{"MASTER_ADDR is not set"}},
		// A hostfile's ssh destination copied into MASTER_ADDR: the ranks
		// would retry the rendezvous for the whole --comm-timeout.
		{"master with a user", full(map[string]string{"MASTER_ADDR": "root@worker-0"}), []string{`MASTER_ADDR "root@worker-0" has a user name`, `"worker-0"`}},
		{"master with a port", full(map[string]string{"MASTER_ADDR": "worker-0:29500"}), []string{"MASTER_PORT=29500"}},
		{"bad port", full(map[string]string{"MASTER_PORT": "70000"}), []string{"MASTER_PORT=70000 is not a TCP port"}},
		{"port text", full(map[string]string{"MASTER_PORT": "http"}), []string{`MASTER_PORT="http"`}},
		{"mpi without master", map[string]string{"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
			"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1"},
			[]string{"MASTER_ADDR is not set", "export MASTER_ADDR", "gotrain launch"}},
		{"pmi without local rank", map[string]string{"PMI_RANK": "0", "PMI_SIZE": "2", "MASTER_ADDR": "h"},
			[]string{"pmi launcher", "MPI_LOCALRANKID is not set"}},
		{"ompi rank too large", map[string]string{"OMPI_COMM_WORLD_RANK": "4", "OMPI_COMM_WORLD_SIZE": "4",
			"OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "MASTER_ADDR": "h"},
			[]string{"OMPI_COMM_WORLD_RANK=4 is not below OMPI_COMM_WORLD_SIZE=4"}},
		{"slurm procid too large", slurm(map[string]string{"SLURM_PROCID": "2"}), []string{"SLURM_PROCID=2 is not below SLURM_NTASKS=2"}},
		{"slurm no tasks per node", slurm(map[string]string{"SLURM_TASKS_PER_NODE": ""}), []string{"SLURM_TASKS_PER_NODE", "--ntasks-per-node"}},
		{"slurm bad tasks per node", slurm(map[string]string{"SLURM_TASKS_PER_NODE": "2(y2)"}), []string{"SLURM_TASKS_PER_NODE", "2(y2)"}},
		{"slurm node outside tasks list", slurm(map[string]string{"SLURM_NODEID": "3", "SLURM_TASKS_PER_NODE": "1(x2)"}), []string{"SLURM_NODEID=3"}},
		{"slurm bad hostlist", slurm(map[string]string{"SLURM_JOB_NODELIST": "n[1-"}), []string{"SLURM_JOB_NODELIST", "hostlist"}},
		{"slurm no nodelist", slurm(map[string]string{"SLURM_JOB_NODELIST": ""}), []string{"scontrol show hostnames"}},
		{"slurm text", slurm(map[string]string{"SLURM_LOCALID": "x"}), []string{"slurm", "SLURM_LOCALID"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, ok, err := DetectRank(mapEnv(tc.env))
			if err == nil {
				t.Fatal("no error")
			}
			if !ok {
				t.Error("an error must come with detected = true")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}
