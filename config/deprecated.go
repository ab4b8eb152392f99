package config

import "fmt"

// mapDeprecated rewrites deprecated keys in the tree to their current names before decoding, with a warning
// each (deepspeed-semantics §1.5). Giving the old and the new key together is an error, as in DeepSpeed.
func (d *decoder) mapDeprecated(root *node) {
	d.renameDeprecated(root, "", "bfloat16", "bf16")

	zn := root.get("zero_optimization")
	if zn != nil && zn.kind == nodeBool {
		// The pre-pydantic form: a boolean switch meaning stage 1.
		stage := "0"
		if zn.b {
			stage = "1"
		}
		obj := &node{kind: nodeObject, line: zn.line, col: zn.col}
		obj.set("stage", &node{kind: nodeNumber, num: stage, line: zn.line, col: zn.col}, pos{zn.line, zn.col})
		root.set("zero_optimization", obj, pos{})
		d.depFrom["zero_optimization.stage"] = fmt.Sprintf("zero_optimization: %t", zn.b)
		d.warnNode(zn, "zero_optimization", fmt.Sprintf("the boolean form is deprecated; %t means stage %s", zn.b, stage),
			fmt.Sprintf("write \"zero_optimization\": {\"stage\": %s}", stage))
		return
	}
	if zn == nil || zn.kind != nodeObject {
		return
	}
	d.offloadFlag(zn, "cpu_offload", "offload_optimizer")
	d.offloadFlag(zn, "cpu_offload_param", "offload_param")
	if v := zn.get("cpu_offload_use_pin_memory"); v != nil {
		at := zn.keyPos("cpu_offload_use_pin_memory")
		d.warnAt(at.line, at.col, "zero_optimization.cpu_offload_use_pin_memory",
			"deprecated and not mapped: DeepSpeed ignores it",
			fmt.Sprintf("remove it and write \"pin_memory\": %s inside offload_optimizer and/or offload_param", v.compact()))
		zn.remove("cpu_offload_use_pin_memory")
	}
	d.renameDeprecated(zn, "zero_optimization", "stage3_gather_fp16_weights_on_model_save", "stage3_gather_16bit_weights_on_model_save")
}

// renameDeprecated moves the value of old to new within obj (whose path is parent).
func (d *decoder) renameDeprecated(obj *node, parent, old, new string) {
	v := obj.get(old)
	if v == nil {
		return
	}
	at := obj.keyPos(old)
	oldPath, newPath := join(parent, old), join(parent, new)
	if obj.get(new) != nil {
		d.errAt(at.line, at.col, oldPath, fmt.Sprintf("Cannot provide deprecated parameter '%s' and replacing parameter '%s' together", old, new),
			fmt.Sprintf("remove %q and keep %q", old, new))
		obj.remove(old)
		return
	}
	obj.rename(old, new)
	d.depFrom[newPath] = oldPath
	d.warnAt(at.line, at.col, oldPath, fmt.Sprintf("deprecated; read as %q", new), fmt.Sprintf("rename %q to %q", old, new))
}

// offloadFlag maps the boolean cpu_offload / cpu_offload_param to an offload block with device "cpu".
func (d *decoder) offloadFlag(zn *node, old, new string) {
	v := zn.get(old)
	if v == nil {
		return
	}
	at := zn.keyPos(old)
	oldPath, newPath := "zero_optimization."+old, "zero_optimization."+new
	zn.remove(old)
	if zn.get(new) != nil {
		d.errAt(at.line, at.col, oldPath, fmt.Sprintf("Cannot provide deprecated parameter '%s' and replacing parameter '%s' together", old, new),
			fmt.Sprintf("remove %q and keep %q", old, new))
		return
	}
	if v.kind != nodeBool {
		d.errNode(v, oldPath, fmt.Sprintf("expected true or false, got %s", describeNode(v)),
			fmt.Sprintf("replace it with \"%s\": {\"device\": \"cpu\"}", new))
		return
	}
	fix := fmt.Sprintf("replace it with \"%s\": {\"device\": \"cpu\"}", new)
	if !v.b {
		fix = "remove it"
		d.warnAt(at.line, at.col, oldPath, "deprecated; false means no offload", fix)
		return
	}
	blk := &node{kind: nodeObject, line: v.line, col: v.col}
	blk.set("device", &node{kind: nodeString, str: "cpu", line: v.line, col: v.col}, at)
	zn.set(new, blk, at)
	d.depFrom[newPath] = oldPath
	d.warnAt(at.line, at.col, oldPath, fmt.Sprintf("deprecated; read as %s.device = \"cpu\"", new), fix)
}
