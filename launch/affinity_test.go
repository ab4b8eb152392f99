//go:build linux

package launch

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRunNodeBindsCores: RunNode with Cores splits them among the node's
// ranks, and each child runs bound to its share (its own
// /proc/self/status says so) with GOTRAIN_BOUND_CORES and OMP_NUM_THREADS
// set to the share's size; the launcher's own thread keeps its mask; with
// LogRank0 rank 0's output is on the terminal and in rank_0.log.
func TestRunNodeBindsCores(t *testing.T) {
	allowed, err := AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(allowed) < 2 {
		t.Skipf("%d CPU(s) allowed; binding 2 ranks needs 2", len(allowed))
	}
	dir := t.TempDir()
	var out, errb bytes.Buffer
	job := NodeJob{
		Nodes:  []Node{{Host: "localhost", Slots: []int{0, 1}}},
		Binary: "/bin/sh", Args: []string{"-c", `grep Cpus_allowed_list /proc/self/status; echo "threads $GOTRAIN_BOUND_CORES $OMP_NUM_THREADS"`},
		Env:        os.Environ(),
		MasterAddr: "127.0.0.1", MasterPort: 29500, CUDAVisible: "-",
		LogDir: dir, LogRank0: true, Cores: allowed,
		Stdout: &out, Stderr: &errb,
	}
	if err := RunNode(context.Background(), ExecRunner{}, job, SuperviseOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	shares, _ := SplitCores(allowed, 2)
	log1, err := os.ReadFile(filepath.Join(dir, "rank_1.log"))
	if err != nil {
		t.Fatal(err)
	}
	log0, err := os.ReadFile(filepath.Join(dir, "rank_0.log"))
	if err != nil {
		t.Fatal(err)
	}
	if string(log0) != out.String() {
		t.Errorf("rank_0.log %q, terminal %q", log0, out.String())
	}
	for r, text := range []string{out.String(), string(log1)} {
		want := cpuList(shares[r])
		if !strings.Contains(text, "Cpus_allowed_list:\t"+want+"\n") {
			t.Errorf("rank %d: %q, want bound to %s", r, text, want)
		}
		n := strconv.Itoa(len(shares[r]))
		if !strings.Contains(text, "threads "+n+" "+n) {
			t.Errorf("rank %d: %q, want %s threads", r, text, n)
		}
	}
	if now, _ := AllowedCPUs(); len(now) != len(allowed) {
		t.Errorf("the launcher's mask is now %v, was %v", now, allowed)
	}
}

// cpuList writes cpus as the kernel's list format: ranges joined by commas.
func cpuList(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(cpus[i]))
		} else {
			parts = append(parts, strconv.Itoa(cpus[i])+"-"+strconv.Itoa(cpus[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}
