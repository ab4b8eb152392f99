package config

import (
	"fmt"
	"strings"
)

// unsupported lists the keys the file sets that gotrain accepts but does not implement: NotSupported keys with
// a non-default value, present raw blocks that are not disabled, NVMe offload, and optimizer or scheduler types
// gotrain does not run. Blocks switched off with "enabled": false are skipped.
func (d *decoder) unsupported(c *Config) []string {
	var out []string
	disabled := func(path string) bool {
		for p := parentPath(path); p != ""; p = parentPath(p) {
			if e := d.ents[p+".enabled"]; e != nil && e.v == false {
				return true
			}
		}
		return false
	}
	for _, s := range d.tab.specs {
		e := d.ents[s.path]
		if e == nil || !e.given || s.status != NotSupported {
			continue
		}
		switch s.kind {
		case kindBlock:
			if s.optional && e.v == nil && d.present(s.path) {
				out = append(out, s.path)
			}
		case kindRawBlock, kindAny:
			n, _ := e.v.(*node)
			if n == nil || n.kind == nodeNull || (n.kind == nodeBool && !n.b) {
				continue
			}
			if en := n.get("enabled"); en != nil && en.kind == nodeBool && !en.b {
				continue
			}
			out = append(out, s.path)
		default:
			if !disabled(s.path) && !sameValue(e.v, s.def) {
				out = append(out, fmt.Sprintf("%s=%s", s.path, formatValue(e.v)))
			}
		}
	}
	for _, dev := range []string{"zero_optimization.offload_optimizer.device", "zero_optimization.offload_param.device"} {
		if e := d.ents[dev]; e != nil && e.v == "nvme" {
			out = append(out, dev+"=nvme")
		}
	}
	o := c.Optimizer
	if !o.Default && o.Type != "" && !o.Supported {
		out = append(out, "optimizer.type="+o.Written)
	}
	for _, ps := range d.params["optimizer.params"] {
		path := "optimizer.params." + ps.name()
		if e := d.ents[path]; ps.status == NotSupported && e != nil && e.given && !sameValue(e.v, ps.def) {
			out = append(out, fmt.Sprintf("%s=%s", path, formatValue(e.v)))
		}
	}
	if s := c.Scheduler; s != nil && s.Torch {
		out = append(out, "scheduler.type="+s.Type)
	}
	return out
}

// warnUnsupported adds the single warning that lists every unsupported key in use.
func (d *decoder) warnUnsupported(list []string) {
	if len(list) == 0 {
		return
	}
	d.warnAt(0, 0, "", fmt.Sprintf("accepted but not supported by gotrain yet, so they have no effect on this run: %s", strings.Join(list, ", ")),
		"remove them, or keep them if the file is also used with DeepSpeed")
}

// Unsupported returns the keys (with their values) that the file sets but gotrain does not implement,
// the same list as the loading warning; a trainer may refuse to start when it is not empty.
func (c *Config) Unsupported() []string { return append([]string(nil), c.unsupported...) }
