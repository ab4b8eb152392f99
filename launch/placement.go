package launch

import (
	"strconv"
	"strings"
)

// DefaultMasterPort is torch.distributed's default rendezvous port, which
// DeepSpeed and the Slurm scripts users already have also use.
const DefaultMasterPort = 29500

// Placement is where one rank runs and who its peers are.
type Placement struct {
	Rank           int    // global rank, in node order then slot order
	WorldSize      int    // processes in the job
	LocalRank      int    // index of this rank among its node's ranks
	LocalWorldSize int    // ranks on this node
	NodeRank       int    // index of the node in the selection
	NumNodes       int    // nodes in the selection
	Host           string // the node's host name as the hostfile spells it
	Slot           int    // the device slot the rank is given
}

// Place assigns global ranks to the slots of nodes: node 0's slots first, in
// their order, then node 1's, and so on, as DeepSpeed's launcher does.
func Place(nodes []Node) []Placement {
	world := 0
	for _, n := range nodes {
		world += len(n.Slots)
	}
	out := make([]Placement, 0, world)
	for ni, n := range nodes {
		for li, s := range n.Slots {
			out = append(out, Placement{
				Rank:           len(out),
				WorldSize:      world,
				LocalRank:      li,
				LocalWorldSize: len(n.Slots),
				NodeRank:       ni,
				NumNodes:       len(nodes),
				Host:           n.Host,
				Slot:           s,
			})
		}
	}
	return out
}

// RankEnv is the environment one rank is started with: the variables
// torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT, GROUP_RANK), the ones DeepSpeed's launcher adds (CROSS_RANK,
// CROSS_SIZE, LOCAL_SIZE) and, unless cudaVisible is "-", CUDA_VISIBLE_DEVICES
// set to cudaVisible or, when that is empty, to the node's slots, so that
// LOCAL_RANK indexes the visible devices.
func RankEnv(p Placement, nodeSlots []int, masterAddr string, masterPort int, cudaVisible string) []string {
	env := []string{
		"RANK=" + strconv.Itoa(p.Rank),
		"WORLD_SIZE=" + strconv.Itoa(p.WorldSize),
		"LOCAL_RANK=" + strconv.Itoa(p.LocalRank),
		"LOCAL_WORLD_SIZE=" + strconv.Itoa(p.LocalWorldSize),
		"MASTER_ADDR=" + masterAddr,
		"MASTER_PORT=" + strconv.Itoa(masterPort),
		"GROUP_RANK=" + strconv.Itoa(p.NodeRank),
		"CROSS_RANK=" + strconv.Itoa(p.NodeRank),
		"CROSS_SIZE=" + strconv.Itoa(p.NumNodes),
		"LOCAL_SIZE=" + strconv.Itoa(p.LocalWorldSize),
	}
	switch cudaVisible {
	case "-":
	case "":
		env = append(env, "CUDA_VISIBLE_DEVICES="+joinInts(nodeSlots))
	default:
		env = append(env, "CUDA_VISIBLE_DEVICES="+cudaVisible)
	}
	return env
}

// MergeEnv returns base with every KEY=VALUE of over replacing the entry of
// the same key (or appended when base has none). Order of base is kept.
func MergeEnv(base, over []string) []string {
	idx := map[string]int{}
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	for _, kv := range over {
		k, _, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}
