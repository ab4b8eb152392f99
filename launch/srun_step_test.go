package launch

import "testing"

func TestInSrunStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want bool
		step SrunStep
	}{
		{"no slurm", map[string]string{}, false, SrunStep{}},
		{"batch shell", map[string]string{"SLURM_PROCID": "0", "SLURM_NTASKS": "16", "SLURM_JOB_NUM_NODES": "2"}, false, SrunStep{}},
		{"one task", map[string]string{"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_STEP_NUM_NODES": "1"}, false, SrunStep{Tasks: 1, Nodes: 1}},
		{"one task per node", map[string]string{"SLURM_PROCID": "1", "SLURM_STEP_ID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_STEP_NUM_NODES": "4"}, true, SrunStep{Task: 1, Tasks: 4, Nodes: 4}},
		{"old names", map[string]string{"SLURM_PROCID": "2", "SLURM_STEPID": "0", "SLURM_NPROCS": "8", "SLURM_NNODES": "1"}, true, SrunStep{Task: 2, Tasks: 8, Nodes: 1}},
	} {
		step, got := InSrunStep(func(k string) string { return tc.env[k] })
		if got != tc.want || (got && step != tc.step) {
			t.Errorf("%s: %+v %v, want %+v %v", tc.name, step, got, tc.step, tc.want)
		}
	}
}

func TestSplitCores(t *testing.T) {
	cpus := []int{0, 1, 2, 3, 4, 5, 6, 8, 9, 10}
	got, err := SplitCores(cpus, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]int{{0, 1, 2, 3}, {4, 5, 6}, {8, 9, 10}}
	for r := range want {
		if len(got[r]) != len(want[r]) {
			t.Fatalf("rank %d: %v, want %v", r, got[r], want[r])
		}
		for i := range want[r] {
			if got[r][i] != want[r][i] {
				t.Fatalf("rank %d: %v, want %v", r, got[r], want[r])
			}
		}
	}
	// Shares are disjoint even when appended to.
	_ = append(got[0], 99)
	if got[1][0] != 4 {
		t.Error("appending to a share overwrote the next")
	}
	if _, err := SplitCores([]int{0}, 2); err == nil {
		t.Error("1 core for 2 ranks was accepted")
	}
}
