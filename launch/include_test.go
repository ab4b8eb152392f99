package launch

import (
	"reflect"
	"strings"
	"testing"
)

// twoWorkers is the hostfile of DeepSpeed's include/exclude examples.
func twoWorkers() []Node {
	return []Node{{"worker-0", []int{0, 1, 2, 3}}, {"worker-1", []int{0, 1, 2, 3}}}
}

func TestSelect(t *testing.T) {
	tests := []struct {
		name  string
		avail []Node
		sel   Selection
		want  []Node
	}{
		{"everything", twoWorkers(), Selection{}, twoWorkers()},
		// DeepSpeed docs: -i "worker-0@worker-1:0,2" uses all of worker-0 and
		// slots 0 and 2 of worker-1.
		{"include example", twoWorkers(), Selection{Include: "worker-0@worker-1:0,2"},
			[]Node{{"worker-0", []int{0, 1, 2, 3}}, {"worker-1", []int{0, 2}}}},
		// -e "worker-1:0" drops one slot.
		{"exclude example", twoWorkers(), Selection{Exclude: "worker-1:0"},
			[]Node{{"worker-0", []int{0, 1, 2, 3}}, {"worker-1", []int{1, 2, 3}}}},
		{"exclude whole node", twoWorkers(), Selection{Exclude: "worker-0"}, []Node{{"worker-1", []int{0, 1, 2, 3}}}},
		{"localhost example", []Node{{"localhost", []int{0, 1, 2, 3}}}, Selection{Include: "localhost:0,1"},
			[]Node{{"localhost", []int{0, 1}}}},
		{"include keeps hostfile order and sorts slots", twoWorkers(), Selection{Include: "worker-1:3,1@worker-0:2@worker-1:1"},
			[]Node{{"worker-0", []int{2}}, {"worker-1", []int{1, 3}}}},
		{"num_nodes takes the first", twoWorkers(), Selection{NumNodes: 1}, []Node{{"worker-0", []int{0, 1, 2, 3}}}},
		{"nproc caps slots", twoWorkers(), Selection{NumSlots: 2}, []Node{{"worker-0", []int{0, 1}}, {"worker-1", []int{0, 1}}}},
		{"nproc on visible devices", []Node{{"localhost", []int{2, 3, 5}}}, Selection{NumSlots: 2}, []Node{{"localhost", []int{2, 3}}}},
		{"both caps", twoWorkers(), Selection{NumNodes: 1, NumSlots: 3}, []Node{{"worker-0", []int{0, 1, 2}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Select(tc.avail, tc.sel)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSelectErrors(t *testing.T) {
	tests := []struct {
		name string
		sel  Selection
		want []string
	}{
		{"include and exclude", Selection{Include: "worker-0", Exclude: "worker-1"}, []string{"mutually exclusive"}},
		{"num_nodes with include", Selection{Include: "worker-0", NumNodes: 1}, []string{"cannot be combined"}},
		{"nproc with exclude", Selection{Exclude: "worker-0", NumSlots: 1}, []string{"cannot be combined"}},
		{"unknown host", Selection{Include: "worker-0@worker-9:0"}, []string{`host "worker-9" is not in hostfile h`, "valid hosts: worker-0, worker-1"}},
		{"unknown slot", Selection{Include: "worker-1:0,7"}, []string{"slot 7 is not on host worker-1", "its slots are 0,1,2,3"}},
		{"unknown slot in exclude", Selection{Exclude: "worker-0:4"}, []string{"--exclude", "slot 4"}},
		{"bad slot", Selection{Include: "worker-1:a"}, []string{`slot "a" of host worker-1`}},
		{"empty slots", Selection{Include: "worker-1:"}, []string{"has ':' but no slots"}},
		{"empty spec", Selection{Include: "worker-0@@worker-1"}, []string{"empty node spec"}},
		{"no host", Selection{Exclude: ":1"}, []string{"no host name"}},
		{"everything excluded", Selection{Exclude: "worker-0@worker-1"}, []string{"leaves no slot"}},
		{"too many nodes", Selection{NumNodes: 3}, []string{"--num_nodes 3", "2: worker-0, worker-1"}},
		{"too many slots", Selection{NumSlots: 5}, []string{"--nproc 5", "host worker-0 has slots (4 in hostfile h)"}},
		{"negative", Selection{NumSlots: -1}, []string{"must be positive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.sel.Source = "hostfile h"
			_, err := Select(twoWorkers(), tc.sel)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestPlace(t *testing.T) {
	got := Place([]Node{{"a", []int{0, 2}}, {"b", []int{1}}, {"c", []int{0, 1, 3}}})
	want := []Placement{
		{Rank: 0, WorldSize: 6, LocalRank: 0, LocalWorldSize: 2, NodeRank: 0, NumNodes: 3, Host: "a", Slot: 0},
		{Rank: 1, WorldSize: 6, LocalRank: 1, LocalWorldSize: 2, NodeRank: 0, NumNodes: 3, Host: "a", Slot: 2},
		{Rank: 2, WorldSize: 6, LocalRank: 0, LocalWorldSize: 1, NodeRank: 1, NumNodes: 3, Host: "b", Slot: 1},
		{Rank: 3, WorldSize: 6, LocalRank: 0, LocalWorldSize: 3, NodeRank: 2, NumNodes: 3, Host: "c", Slot: 0},
		{Rank: 4, WorldSize: 6, LocalRank: 1, LocalWorldSize: 3, NodeRank: 2, NumNodes: 3, Host: "c", Slot: 1},
		{Rank: 5, WorldSize: 6, LocalRank: 2, LocalWorldSize: 3, NodeRank: 2, NumNodes: 3, Host: "c", Slot: 3},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
}

func TestRankEnvAndMergeEnv(t *testing.T) {
	p := Placement{Rank: 4, WorldSize: 6, LocalRank: 1, LocalWorldSize: 3, NodeRank: 2, NumNodes: 3, Host: "c", Slot: 1}
	got := RankEnv(p, []int{0, 1, 3}, "10.0.0.1", 29501, "")
	want := []string{"RANK=4", "WORLD_SIZE=6", "LOCAL_RANK=1", "LOCAL_WORLD_SIZE=3", "MASTER_ADDR=10.0.0.1",
		"MASTER_PORT=29501", "GROUP_RANK=2", "CROSS_RANK=2", "CROSS_SIZE=3", "LOCAL_SIZE=3", "CUDA_VISIBLE_DEVICES=0,1,3"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RankEnv = %v", got)
	}
	if e := RankEnv(p, []int{0}, "h", 1, "-"); strings.Contains(strings.Join(e, " "), "CUDA_VISIBLE_DEVICES") {
		t.Fatalf("\"-\" must leave CUDA_VISIBLE_DEVICES alone: %v", e)
	}
	if e := RankEnv(p, []int{0}, "h", 1, "GPU-abc"); e[len(e)-1] != "CUDA_VISIBLE_DEVICES=GPU-abc" {
		t.Fatalf("explicit CUDA_VISIBLE_DEVICES: %v", e)
	}
	merged := MergeEnv([]string{"A=1", "RANK=9", "B=2", "A=3"}, []string{"RANK=0", "C=4"})
	if want := []string{"A=3", "RANK=0", "B=2", "C=4"}; !reflect.DeepEqual(merged, want) {
		t.Fatalf("MergeEnv = %v, want %v", merged, want)
	}
}
