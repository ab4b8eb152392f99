package launch

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Selection says which of the available nodes and slots a job uses, with the
// semantics of DeepSpeed's launcher flags.
type Selection struct {
	// Include is --include: NODE_SPEC[@NODE_SPEC...] with
	// NODE_SPEC = NAME[:SLOT[,SLOT...]]; a bare NAME takes all its slots.
	// Only the listed nodes and slots are used.
	Include string
	// Exclude is --exclude in the same syntax: the listed slots (or whole
	// nodes) are removed. Include and Exclude are mutually exclusive.
	Exclude string
	// NumNodes is --num_nodes: use the first K nodes; 0 means all.
	NumNodes int
	// NumSlots is --nproc/--num_gpus: use the first N slots of every node
	// (slots [0, N) for a hostfile); 0 means all of each node's slots.
	NumSlots int
	// Source names where the available nodes came from ("hostfile hosts.txt",
	// "this machine"); it is used in error messages only.
	Source string
}

// Select applies sel to the available nodes. The result keeps the nodes in
// their original order with ascending slots and leaves out nodes with no
// slot left; RANK is later assigned in exactly this order (Place).
//
// As in DeepSpeed, Include and Exclude are mutually exclusive and neither can
// be combined with NumNodes or NumSlots. Unlike DeepSpeed, asking for more
// nodes or slots than exist is an error instead of a silent change.
func Select(avail []Node, sel Selection) ([]Node, error) {
	if sel.Include != "" && sel.Exclude != "" {
		return nil, fmt.Errorf("--include and --exclude are mutually exclusive; use one of them")
	}
	if (sel.Include != "" || sel.Exclude != "") && (sel.NumNodes > 0 || sel.NumSlots > 0) {
		return nil, fmt.Errorf("--num_nodes and --nproc/--num_gpus cannot be combined with --include/--exclude; list the nodes and slots in --include instead")
	}
	if sel.NumNodes < 0 || sel.NumSlots < 0 {
		return nil, fmt.Errorf("--num_nodes and --nproc must be positive (got %d and %d)", sel.NumNodes, sel.NumSlots)
	}
	source := sel.Source
	if source == "" {
		source = "the available resources"
	}

	chosen := make([]map[int]bool, len(avail)) // per avail node: slot → used
	var err error
	switch {
	case sel.Include != "":
		err = applyFilter(avail, chosen, sel.Include, "--include", source, true)
	case sel.Exclude != "":
		for i, n := range avail {
			chosen[i] = map[int]bool{}
			for _, s := range n.Slots {
				chosen[i][s] = true
			}
		}
		err = applyFilter(avail, chosen, sel.Exclude, "--exclude", source, false)
	default:
		for i, n := range avail {
			chosen[i] = map[int]bool{}
			for _, s := range n.Slots {
				chosen[i][s] = true
			}
		}
	}
	if err != nil {
		return nil, err
	}

	var out []Node
	for i, n := range avail {
		var slots []int
		for _, s := range n.Slots {
			if chosen[i][s] {
				slots = append(slots, s)
			}
		}
		if len(slots) == 0 {
			continue
		}
		slices.Sort(slots)
		out = append(out, Node{Host: n.Host, Slots: slices.Compact(slots)})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the resource filter leaves no slot to run on (%s has %s)", source, describeNodes(avail))
	}

	if sel.NumNodes > 0 {
		if sel.NumNodes > len(out) {
			return nil, fmt.Errorf("--num_nodes %d asks for more nodes than %s has (%d: %s)", sel.NumNodes, source, len(out), hostNames(out))
		}
		out = out[:sel.NumNodes]
	}
	if sel.NumSlots > 0 {
		for i, n := range out {
			if sel.NumSlots > len(n.Slots) {
				return nil, fmt.Errorf("--nproc %d asks for more processes than host %s has slots (%d in %s); lower --nproc or raise its slots", sel.NumSlots, n.Host, len(n.Slots), source)
			}
			out[i].Slots = n.Slots[:sel.NumSlots]
		}
	}
	return out, nil
}

// nodeSpec is one parsed NAME[:SLOT[,SLOT...]]; Slots is nil for a bare NAME.
type nodeSpec struct {
	Host  string
	Slots []int
}

// parseNodeSpecs parses DeepSpeed's NODE_SPEC[@NODE_SPEC...] syntax.
func parseNodeSpecs(s, flag string) ([]nodeSpec, error) {
	var specs []nodeSpec
	for part := range strings.SplitSeq(s, "@") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, fmt.Errorf("%s %q: empty node spec; the syntax is NAME[:SLOT[,SLOT...]] joined by '@', e.g. worker-0@worker-1:0,2", flag, s)
		}
		host, slotList, hasSlots := strings.Cut(part, ":")
		if host == "" {
			return nil, fmt.Errorf("%s %q: node spec %q has no host name; e.g. worker-1:0,2", flag, s, part)
		}
		spec := nodeSpec{Host: host}
		if hasSlots {
			if slotList == "" {
				return nil, fmt.Errorf("%s %q: node spec %q has ':' but no slots; write %s for all slots or %s:0,1 for some", flag, s, part, host, host)
			}
			for f := range strings.SplitSeq(slotList, ",") {
				n, err := parseCount(strings.TrimSpace(f))
				if err != nil {
					return nil, fmt.Errorf("%s %q: slot %q of host %s is %v; slots are device numbers like 0,2", flag, s, f, host, err)
				}
				spec.Slots = append(spec.Slots, n)
			}
		}
		specs = append(specs, spec)
	}
	return specs, nil
}

// applyFilter adds (include) or removes (exclude) the slots named by spec.
func applyFilter(avail []Node, chosen []map[int]bool, spec, flag, source string, include bool) error {
	specs, err := parseNodeSpecs(spec, flag)
	if err != nil {
		return err
	}
	for _, ns := range specs {
		idx := slices.IndexFunc(avail, func(n Node) bool { return n.Host == ns.Host })
		if idx < 0 {
			return fmt.Errorf("%s: host %q is not in %s; valid hosts: %s", flag, ns.Host, source, hostNames(avail))
		}
		if chosen[idx] == nil {
			chosen[idx] = map[int]bool{}
		}
		slots := ns.Slots
		if slots == nil {
			slots = avail[idx].Slots
		}
		for _, s := range slots {
			if !slices.Contains(avail[idx].Slots, s) {
				return fmt.Errorf("%s: slot %d is not on host %s in %s; its slots are %s", flag, s, ns.Host, source, joinInts(avail[idx].Slots))
			}
			chosen[idx][s] = include
		}
	}
	return nil
}

func hostNames(nodes []Node) string {
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Host
	}
	return strings.Join(names, ", ")
}

func describeNodes(nodes []Node) string {
	parts := make([]string, len(nodes))
	for i, n := range nodes {
		parts[i] = n.Host + ":" + joinInts(n.Slots)
	}
	return strings.Join(parts, " ")
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
