package launch

import (
	"fmt"
	"strconv"
	"strings"
)

// ExpandHostlist expands Slurm's compressed hostlist syntax, as found in
// SLURM_JOB_NODELIST: "node[01-03,07],gpu5" is node01 node02 node03 node07
// gpu5. Ranges keep the zero padding of their lower bound, several bracket
// groups in one name multiply out ("r[1-2]n[1-2]" is r1n1 r1n2 r2n1 r2n2),
// and commas inside brackets do not separate names.
//
// A list of more than 131072 hosts is refused: it is a typo, and expanding
// it could exhaust memory.
func ExpandHostlist(list string) ([]string, error) {
	var out []string
	for _, item := range splitHostlist(list) {
		if item == "" {
			continue
		}
		names, err := expandHostItem(item, maxHostlist-len(out))
		if err != nil {
			return nil, fmt.Errorf("hostlist %q: %w", list, err)
		}
		out = append(out, names...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("hostlist %q names no host", list)
	}
	return out, nil
}

// splitHostlist splits at commas outside brackets. Unbalanced brackets are
// left for expandHostItem to report.
func splitHostlist(list string) []string {
	var items []string
	depth, start := 0, 0
	for i := 0; i < len(list); i++ {
		switch list[i] {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				items = append(items, strings.TrimSpace(list[start:i]))
				start = i + 1
			}
		}
	}
	return append(items, strings.TrimSpace(list[start:]))
}

// maxHostlist bounds the hosts of one expanded hostlist.
const maxHostlist = 1 << 17

// expandHostItem expands one name with bracket groups into at most limit
// names.
func expandHostItem(item string, limit int) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if strings.IndexByte(item, ']') >= 0 {
			return nil, fmt.Errorf("%q has ']' without '['", item)
		}
		return []string{item}, nil
	}
	end := strings.IndexByte(item[open:], ']')
	if end < 0 {
		return nil, fmt.Errorf("%q has '[' without ']'", item)
	}
	end += open
	prefix, body, rest := item[:open], item[open+1:end], item[end+1:]
	if strings.IndexByte(prefix, ']') >= 0 || strings.IndexByte(body, '[') >= 0 {
		return nil, fmt.Errorf("%q has unbalanced brackets", item)
	}
	values, err := expandRanges(body)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", item, err)
	}
	tails, err := expandHostItem(rest, limit)
	if err != nil {
		return nil, err
	}
	if len(values) > limit || len(values)*len(tails) > limit {
		return nil, fmt.Errorf("%q expands to more than %d hosts", item, maxHostlist)
	}
	out := make([]string, 0, len(values)*len(tails))
	for _, v := range values {
		for _, t := range tails {
			out = append(out, prefix+v+t)
		}
	}
	return out, nil
}

// expandRanges expands "01-03,07" into 01 02 03 07.
func expandRanges(body string) ([]string, error) {
	if body == "" {
		return nil, fmt.Errorf("empty brackets")
	}
	var out []string
	for part := range strings.SplitSeq(body, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		if !isRange {
			hi = lo
		}
		a, errA := parseCount(lo)
		b, errB := parseCount(hi)
		if errA != nil || errB != nil {
			return nil, fmt.Errorf("range %q is not N or N-M with whole numbers", part)
		}
		if b < a {
			return nil, fmt.Errorf("range %q runs backwards", part)
		}
		// A huge range is almost certainly a typo; refusing it avoids
		// allocating millions of names.
		if b-a >= 1<<16 {
			return nil, fmt.Errorf("range %q has more than 65536 hosts", part)
		}
		if len(out)+b-a+1 > maxHostlist {
			return nil, fmt.Errorf("ranges %q make more than %d hosts", body, maxHostlist)
		}
		width := len(lo)
		for v := a; v <= b; v++ {
			s := strconv.Itoa(v)
			if len(s) < width {
				s = strings.Repeat("0", width-len(s)) + s
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// ExpandTasksPerNode expands Slurm's SLURM_TASKS_PER_NODE syntax, where
// "4(x2),3" means 4 tasks on each of the first two nodes and 3 on the third.
func ExpandTasksPerNode(s string) ([]int, error) {
	var out []int
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		count, rep := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasSuffix(part, ")") || !strings.HasPrefix(part[i+1:], "x") {
				return nil, fmt.Errorf("tasks per node %q: %q is not N or N(xK)", s, part)
			}
			count, rep = part[:i], part[i+2:len(part)-1]
		}
		n, err1 := parseCount(count)
		k, err2 := parseCount(rep)
		if err1 != nil || err2 != nil || n == 0 || k == 0 {
			return nil, fmt.Errorf("tasks per node %q: %q is not N or N(xK) with positive whole numbers", s, part)
		}
		if len(out)+k > 1<<20 {
			return nil, fmt.Errorf("tasks per node %q: too many nodes", s)
		}
		for range k {
			out = append(out, n)
		}
	}
	return out, nil
}
