package launch

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// LocalPool is this machine's resources for a launch without a hostfile.
type LocalPool struct {
	Node Node // host "localhost"
	// GPU says the slots are GPUs; otherwise they are CPU ranks and
	// CUDA_VISIBLE_DEVICES is left as it is.
	GPU bool
	// Names is the CUDA_VISIBLE_DEVICES entry of each slot when the entries
	// are names (GPU-<uuid>, MIG-...) rather than numbers; nil otherwise.
	Names  []string
	Source string // describes the pool in error messages
}

// NewLocalPool finds the local slots the way DeepSpeed does on one machine:
// the devices listed in CUDA_VISIBLE_DEVICES when it is set (set but empty
// means no GPU), else gpus devices numbered from 0 (CountNvidiaDevices),
// else nproc CPU rank slots, 1 when nproc is 0.
func NewLocalPool(cudaVisible string, cudaVisibleSet bool, gpus, nproc int) LocalPool {
	p := LocalPool{Node: Node{Host: "localhost"}}
	var entries []string
	for e := range strings.SplitSeq(cudaVisible, ",") {
		if e = strings.TrimSpace(e); e != "" {
			entries = append(entries, e)
		}
	}
	switch {
	case cudaVisibleSet && len(entries) > 0:
		p.GPU = true
		p.Source = "this machine (CUDA_VISIBLE_DEVICES=" + cudaVisible + ")"
		var ids []int
		for _, e := range entries {
			n, err := parseCount(e)
			if err != nil || slices.Contains(ids, n) {
				p.Node.Slots = slotRange(len(entries))
				p.Names = entries
				return p
			}
			ids = append(ids, n)
		}
		p.Node.Slots = ids
		return p
	case !cudaVisibleSet && gpus > 0:
		p.GPU = true
		p.Node.Slots = slotRange(gpus)
		p.Source = fmt.Sprintf("this machine (%d GPUs)", gpus)
		return p
	}
	n := max(nproc, 1)
	p.Node.Slots = slotRange(n)
	p.Source = fmt.Sprintf("this machine (no GPU; %d CPU rank slot(s), as many as --nproc)", n)
	return p
}

// CUDAVisible is NodeJob.CUDAVisible for the selected part n of the pool:
// "" (the slot numbers) for numbered GPUs, the selected names for named
// ones, and "-" (leave it alone) for CPU ranks.
func (p LocalPool) CUDAVisible(n Node) string {
	switch {
	case !p.GPU:
		return "-"
	case p.Names != nil:
		names := make([]string, len(n.Slots))
		for i, s := range n.Slots {
			names[i] = p.Names[s]
		}
		return strings.Join(names, ",")
	}
	return ""
}

// CountNvidiaDevices counts the GPU device nodes nvidia0, nvidia1, ... in
// dir (/dev), which exist wherever the NVIDIA driver is loaded; it needs no
// CUDA library.
func CountNvidiaDevices(dir string) int {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range entries {
		if num, ok := strings.CutPrefix(e.Name(), "nvidia"); ok {
			if _, err := strconv.Atoi(num); err == nil && strings.Trim(num, "0123456789") == "" {
				n++
			}
		}
	}
	return n
}
