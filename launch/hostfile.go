package launch

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// MaxSlots bounds the slots of one hostfile line: more is a typo, and each
// slot becomes a process.
const MaxSlots = 4096

// Node is one host and the device slots a job uses on it, in ascending order.
// A hostfile line "worker-0 slots=4" is Node{Host: "worker-0", Slots: [0 1 2 3]}.
type Node struct {
	Host  string `json:"host"`
	Slots []int  `json:"slots"`
}

// ReadHostfile reads and parses a DeepSpeed hostfile (see ParseHostfile).
func ReadHostfile(path string) ([]Node, error) {
	f, _, err := regularfile.Open("hostfile", path)
	if err != nil {
		return nil, fmt.Errorf("read %w", err)
	}
	defer f.Close()
	return ParseHostfile(path, f)
}

// ParseHostfile parses DeepSpeed's hostfile format: one "<host> slots=<n>"
// line per host, in the order ranks are assigned; blank lines and text after
// '#' are ignored. Open MPI's "max_slots=<n>" may follow and is ignored, so
// one file serves both launchers. name is used in error messages only.
//
// Errors name the file and line and say how to fix it: a bad entry (quoted),
// slots=0, a host listed twice, and a file with no hosts at all.
func ParseHostfile(name string, r io.Reader) ([]Node, error) {
	var nodes []Node
	seen := map[string]int{} // host → line it was first listed on
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		raw := sc.Text()
		text := raw
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		host, slots, err := parseHostfileEntry(fields)
		if err != nil {
			return nil, fmt.Errorf("hostfile %s line %d: bad entry %q: %v; each line must be `<host> slots=<n>`, e.g. `worker-0 slots=8`", name, line, strings.TrimSpace(raw), err)
		}
		if slots == 0 {
			return nil, fmt.Errorf("hostfile %s line %d: host %s has slots=0; give it at least one slot or delete the line", name, line, host)
		}
		if slots > MaxSlots {
			return nil, fmt.Errorf("hostfile %s line %d: host %s has slots=%d; a node runs at most %d ranks", name, line, host, slots, MaxSlots)
		}
		if first, dup := seen[host]; dup {
			return nil, fmt.Errorf("hostfile %s line %d: host %s is already listed on line %d; keep one line per host with its total slots", name, line, host, first)
		}
		seen[host] = line
		nodes = append(nodes, Node{Host: host, Slots: slotRange(slots)})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("hostfile %s: a line is longer than %d bytes; is it a hostfile?", name, bufio.MaxScanTokenSize)
		}
		return nil, fmt.Errorf("read hostfile %s: %w", name, err)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("hostfile %s has no host entries; add one line per host like `worker-0 slots=8`, or leave out --hostfile to run on this machine only", name)
	}
	return nodes, nil
}

func parseHostfileEntry(fields []string) (host string, slots int, err error) {
	host = fields[0]
	if strings.Contains(host, "=") {
		return "", 0, fmt.Errorf("the line starts with %q where a host name belongs", host)
	}
	if len(fields) < 2 {
		return "", 0, fmt.Errorf("host %s has no slots=<n>", host)
	}
	v, ok := strings.CutPrefix(fields[1], "slots=")
	if !ok {
		return "", 0, fmt.Errorf("expected slots=<n> after the host, found %q", fields[1])
	}
	slots, err = parseCount(v)
	if err != nil {
		return "", 0, fmt.Errorf("slots=%s: %v", v, err)
	}
	for _, extra := range fields[2:] {
		m, ok := strings.CutPrefix(extra, "max_slots=")
		if !ok {
			return "", 0, fmt.Errorf("unexpected %q after slots=%s", extra, v)
		}
		if _, err := parseCount(m); err != nil {
			return "", 0, fmt.Errorf("max_slots=%s: %v", m, err)
		}
	}
	return host, slots, nil
}

// parseCount accepts a non-negative decimal integer with digits only.
func parseCount(s string) (int, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("not a non-negative whole number")
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("too large")
	}
	return n, nil
}

func slotRange(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
