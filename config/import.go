package config

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gotrain/gotrain/internal/regularfile"
)

// Imported is another tool's config converted to a DeepSpeed config gotrain trains with.
type Imported struct {
	File string // the file read
	Kind string // what the file is, e.g. "Accelerate config (distributed_type DEEPSPEED, inline deepspeed_config)"
	// DeepSpeed is the converted config, indented JSON ending in a newline.
	DeepSpeed []byte
	// DeepSpeedFile is Accelerate's deepspeed_config_file as found, when the config came from it ("" otherwise).
	DeepSpeedFile string
	Launch        ImportLaunch
	Mapped        []string // "source key value → DeepSpeed key value", in file order
	Ignored       []string // "source key: why gotrain has no equivalent"
}

// ImportLaunch is what an Accelerate config says about the job's processes; zero values are unset.
type ImportLaunch struct {
	NumProcesses    int    // over all machines, as Accelerate counts them
	NumMachines     int    // nodes
	MachineRank     int    // this node's index
	MainProcessIP   string // rank 0's address
	MainProcessPort int
	GPUIDs          string // "all" or a comma list
	Hostfile        string // deepspeed_config.deepspeed_hostfile
}

// maxImportBytes bounds an imported file, as maxConfigBytes bounds a DeepSpeed config.
const maxImportBytes = 16 << 20

// ImportFile reads and converts the Accelerate or FSDP config at path; see Import. A deepspeed_config_file it
// names is looked up from the working directory, as accelerate launch does, then beside path.
func ImportFile(path string) (*Imported, error) {
	data, err := regularfile.Read("config", path, maxImportBytes)
	if err != nil {
		return nil, err
	}
	read := func(name string) (string, []byte, error) {
		tries := []string{name}
		if !filepath.IsAbs(name) {
			tries = append(tries, filepath.Join(filepath.Dir(path), name))
		}
		var first error
		for _, t := range tries {
			b, err := regularfile.Read("DeepSpeed config", t, maxConfigBytes)
			if err == nil {
				return t, b, nil
			}
			if first == nil {
				first = err
			}
		}
		return "", nil, first
	}
	return Import(path, data, read)
}

// Describe says what a config file is from its bytes: a DeepSpeed JSON config, an Accelerate config, a PyTorch
// FSDP config, or YAML of an unknown kind. It reads nothing else.
func Describe(data []byte) string {
	kind, root := detect(data)
	switch kind {
	case kindAccelerate:
		return fmt.Sprintf("an Accelerate config (distributed_type %s)", stringOr(root.get("distributed_type"), "NO"))
	case kindFSDPJSON:
		return "a PyTorch FSDP config (JSON)"
	case kindFSDPYAML:
		return "a PyTorch FSDP config (YAML)"
	case kindOtherYAML:
		return "a YAML file that is neither an Accelerate nor an FSDP config"
	}
	return "a DeepSpeed JSON config"
}

// IsForeign reports whether data is a config Import converts rather than a DeepSpeed JSON config.
func IsForeign(data []byte) bool {
	k, _ := detect(data)
	return k != kindDeepSpeed
}

type fileKind uint8

const (
	kindDeepSpeed fileKind = iota
	kindAccelerate
	kindFSDPJSON
	kindFSDPYAML
	kindOtherYAML
)

// detect tells the file kinds apart: JSON starts with {, possibly after comments; FSDP files have fsdp_ or
// sharding_strategy keys; Accelerate configs have distributed_type or compute_environment.
func detect(data []byte) (fileKind, *node) {
	if root, errs := parseTree("", data); root != nil && len(errs) == 0 {
		if isFSDP(root) {
			return kindFSDPJSON, root
		}
		return kindDeepSpeed, root
	}
	t := bytes.TrimSpace(data)
	if len(t) > 0 && (t[0] == '{' || t[0] == '[') {
		return kindDeepSpeed, nil // broken JSON: the DeepSpeed reader says where
	}
	root, err := parseYAML("", data)
	if err != nil {
		return kindOtherYAML, nil
	}
	switch {
	case root.get("distributed_type") != nil || root.get("compute_environment") != nil:
		return kindAccelerate, root
	case isFSDP(root):
		return kindFSDPYAML, root
	}
	return kindOtherYAML, root
}

func isFSDP(root *node) bool {
	for _, k := range root.keys {
		if strings.HasPrefix(k, "fsdp_") || k == "sharding_strategy" {
			return true
		}
	}
	return false
}

func stringOr(n *node, def string) string {
	if n == nil || n.kind == nodeNull {
		return def
	}
	if n.kind == nodeString {
		return n.str
	}
	return n.compact()
}

// Import converts an Accelerate config (YAML; distributed_type DEEPSPEED with deepspeed_config_file or the inline
// keys, FSDP with fsdp_config, MULTI_GPU, MULTI_CPU or NO) or a PyTorch FSDP config (JSON or YAML) to a DeepSpeed
// config. read opens a deepspeed_config_file and says which path it found. Settings without an equivalent are
// listed in Ignored with the reason; a setting gotrain cannot honour (HYBRID_SHARD, TPU and Megatron types) is an
// error naming the closest gotrain setup.
func Import(file string, data []byte, read func(string) (string, []byte, error)) (*Imported, error) {
	kind, root := detect(data)
	im := &Imported{File: file}
	switch kind {
	case kindDeepSpeed:
		return nil, fmt.Errorf("%s is already a DeepSpeed JSON config: train with it directly (gotrain config validate %s checks it)", file, file)
	case kindOtherYAML:
		if _, err := parseYAML(file, data); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%s is YAML but neither an Accelerate config (no distributed_type) nor an FSDP config (no fsdp_* keys); gotrain imports those two", file)
	case kindFSDPJSON, kindFSDPYAML:
		im.Kind = Describe(data)
		ds := newObj()
		ds.set("train_micro_batch_size_per_gpu", str("auto"), pos{})
		if err := im.fsdp(root, ds, ""); err != nil {
			return nil, err
		}
		im.DeepSpeed = renderJSON(ds)
		return im, nil
	}
	return im, im.accelerate(root, read)
}

// accelerate converts an Accelerate config.
func (im *Imported) accelerate(root *node, read func(string) (string, []byte, error)) error {
	dt := strings.ToUpper(stringOr(root.get("distributed_type"), "NO"))
	im.Kind = fmt.Sprintf("an Accelerate config (distributed_type %s)", dt)
	ds := newObj()
	mixed := strings.ToLower(stringOr(root.get("mixed_precision"), "no"))
	handled := map[string]bool{"distributed_type": true, "mixed_precision": true}
	l := &im.Launch
	for _, k := range []struct {
		key string
		dst *int
	}{{"num_processes", &l.NumProcesses}, {"num_machines", &l.NumMachines}, {"machine_rank", &l.MachineRank}, {"main_process_port", &l.MainProcessPort}} {
		handled[k.key] = true
		if v := root.get(k.key); v != nil && v.kind == nodeNumber {
			i, problem := intOf(v.num)
			if problem != "" || i < 0 || i > 1<<20 {
				return fmt.Errorf("%s:%d: %s: %s is not a count", im.File, v.line, k.key, v.num)
			}
			*k.dst = int(i)
			im.Mapped = append(im.Mapped, fmt.Sprintf("%s %d → gotrain launch %s", k.key, i, launchFlagOf(k.key)))
		}
	}
	for _, k := range []struct {
		key string
		dst *string
	}{{"main_process_ip", &l.MainProcessIP}, {"gpu_ids", &l.GPUIDs}} {
		handled[k.key] = true
		if v := root.get(k.key); v != nil && v.kind != nodeNull {
			*k.dst = stringOr(v, "")
			im.Mapped = append(im.Mapped, fmt.Sprintf("%s %s → gotrain launch %s", k.key, *k.dst, launchFlagOf(k.key)))
		}
	}
	switch dt {
	case "DEEPSPEED":
		handled["deepspeed_config"] = true
		if err := im.acceleratedDeepSpeed(root.get("deepspeed_config"), mixed, read); err != nil {
			return err
		}
	case "FSDP":
		handled["fsdp_config"] = true
		ds.set("train_micro_batch_size_per_gpu", str("auto"), pos{})
		fc := root.get("fsdp_config")
		if fc == nil || fc.kind != nodeObject {
			return fmt.Errorf("%s: distributed_type FSDP without an fsdp_config mapping; run accelerate config again, or write fsdp_config: {fsdp_sharding_strategy: FULL_SHARD}", im.File)
		}
		if err := im.fsdp(fc, ds, "fsdp_config."); err != nil {
			return err
		}
		im.precision(ds, mixed, "mixed_precision")
		im.DeepSpeed = renderJSON(ds)
	case "MULTI_GPU", "MULTI_CPU", "NO":
		// DDP: every rank holds everything, which is ZeRO stage 0.
		ds.set("train_micro_batch_size_per_gpu", str("auto"), pos{})
		ds.set("gradient_accumulation_steps", str("auto"), pos{})
		zo := newObj()
		zo.set("stage", num("0"), pos{})
		ds.set("zero_optimization", zo, pos{})
		im.Mapped = append(im.Mapped, fmt.Sprintf("distributed_type %s (data parallel, every rank holds everything) → zero_optimization.stage 0", dt))
		im.precision(ds, mixed, "mixed_precision")
		im.DeepSpeed = renderJSON(ds)
	default:
		return fmt.Errorf("%s: distributed_type %s has no gotrain equivalent (gotrain is data-parallel with ZeRO over CPU ranks or GPUs); use DEEPSPEED, FSDP or MULTI_GPU", im.File, dt)
	}
	for _, k := range root.keys {
		if !handled[k] {
			im.Ignored = append(im.Ignored, fmt.Sprintf("%s: %s", k, accelerateIgnoredReason(k)))
		}
	}
	return nil
}

func launchFlagOf(key string) string {
	return map[string]string{
		"num_processes": "--nproc (per node: num_processes ÷ num_machines)", "num_machines": "--num_nodes",
		"machine_rank": "--node_rank", "main_process_port": "--master_port", "main_process_ip": "--master_addr",
		"gpu_ids": "CUDA_VISIBLE_DEVICES",
	}[key]
}

// accelerateIgnoredReason says why an Accelerate setting has no gotrain equivalent.
func accelerateIgnoredReason(key string) string {
	switch key {
	case "compute_environment", "same_network", "rdzv_backend", "main_training_function", "debug":
		return "describes how accelerate launch starts a Python script; gotrain launch starts gotrain ranks itself"
	case "downcast_bf16":
		return "TPU-only"
	case "use_cpu":
		return "gotrain picks the device with --device (cpu, cuda or auto)"
	case "enable_cpu_affinity":
		return "use gotrain launch --bind_cores_to_rank"
	case "dynamo_config", "dynamo_backend":
		return "gotrain runs its own kernels; there is no torch.compile"
	}
	if strings.HasPrefix(key, "tpu_") {
		return "TPU-only"
	}
	if strings.HasPrefix(key, "megatron_lm") || strings.HasPrefix(key, "ipex") || strings.HasPrefix(key, "mpirun") {
		return "has no gotrain equivalent"
	}
	return "not an Accelerate setting gotrain knows"
}

// acceleratedDeepSpeed converts distributed_type DEEPSPEED's deepspeed_config block.
func (im *Imported) acceleratedDeepSpeed(dc *node, mixed string, read func(string) (string, []byte, error)) error {
	if dc == nil || dc.kind != nodeObject {
		dc = newObj()
	}
	if h := dc.get("deepspeed_hostfile"); h != nil && h.kind == nodeString {
		im.Launch.Hostfile = h.str
		im.Mapped = append(im.Mapped, fmt.Sprintf("deepspeed_config.deepspeed_hostfile %s → gotrain launch --hostfile", h.str))
	}
	if f := dc.get("deepspeed_config_file"); f != nil && f.kind == nodeString && f.str != "" {
		im.Kind += ", deepspeed_config_file"
		found, data, err := read(f.str)
		if err != nil {
			return fmt.Errorf("%s: deepspeed_config_file %s: %w", im.File, f.str, err)
		}
		root, errs := parseTree(found, data)
		if root == nil {
			return errs
		}
		im.DeepSpeedFile = found
		im.Mapped = append(im.Mapped, fmt.Sprintf("deepspeed_config.deepspeed_config_file %s → the DeepSpeed config, read from %s", f.str, found))
		// Accelerate fills the file's "auto" precision from mixed_precision.
		for _, p := range []string{"bf16", "fp16"} {
			if b := root.get(p); b != nil && b.get("enabled").isAuto() {
				b.set("enabled", &node{kind: nodeBool, b: mixed == p}, pos{})
				im.Mapped = append(im.Mapped, fmt.Sprintf("mixed_precision %s → %s.enabled %v (was \"auto\")", mixed, p, mixed == p))
			}
		}
		for _, k := range dc.keys {
			switch k {
			case "deepspeed_config_file", "deepspeed_hostfile":
			case "zero3_init_flag", "deepspeed_multinode_launcher":
				im.Ignored = append(im.Ignored, fmt.Sprintf("deepspeed_config.%s: %s", k, dsInlineIgnoredReason(k)))
			default:
				im.Ignored = append(im.Ignored, fmt.Sprintf("deepspeed_config.%s: the deepspeed_config_file decides it (accelerate launch refuses both)", k))
			}
		}
		im.DeepSpeed = renderJSON(root)
		return nil
	}
	im.Kind += ", inline deepspeed_config"
	ds := newObj()
	ds.set("train_micro_batch_size_per_gpu", str("auto"), pos{})
	zo := newObj()
	stage := dc.get("zero_stage")
	if stage == nil {
		stage = num("2") // accelerate config's default
	}
	zo.set("stage", stage, pos{})
	im.Mapped = append(im.Mapped, fmt.Sprintf("deepspeed_config.zero_stage %s → zero_optimization.stage", stringOr(stage, "")))
	gas := dc.get("gradient_accumulation_steps")
	if gas == nil {
		gas = str("auto")
	} else {
		im.Mapped = append(im.Mapped, fmt.Sprintf("deepspeed_config.gradient_accumulation_steps %s → gradient_accumulation_steps", stringOr(gas, "")))
	}
	ds.set("gradient_accumulation_steps", gas, pos{})
	if clip := dc.get("gradient_clipping"); clip != nil {
		ds.set("gradient_clipping", clip, pos{})
		im.Mapped = append(im.Mapped, fmt.Sprintf("deepspeed_config.gradient_clipping %s → gradient_clipping", stringOr(clip, "")))
	}
	for _, o := range []string{"optimizer", "param"} {
		dev := dc.get("offload_" + o + "_device")
		if dev == nil || dev.kind != nodeString {
			continue
		}
		blk := newObj()
		blk.set("device", dev, pos{})
		if p := dc.get("offload_" + o + "_nvme_path"); p != nil && p.kind == nodeString && dev.str == "nvme" {
			blk.set("nvme_path", p, pos{})
		}
		zo.set("offload_"+o, blk, pos{})
		im.Mapped = append(im.Mapped, fmt.Sprintf("deepspeed_config.offload_%s_device %s → zero_optimization.offload_%s.device", o, dev.str, o))
	}
	if s := dc.get("zero3_save_16bit_model"); s != nil {
		zo.set("stage3_gather_16bit_weights_on_model_save", s, pos{})
		im.Mapped = append(im.Mapped, "deepspeed_config.zero3_save_16bit_model → zero_optimization.stage3_gather_16bit_weights_on_model_save")
	}
	ds.set("zero_optimization", zo, pos{})
	im.precision(ds, mixed, "mixed_precision")
	known := map[string]bool{"zero_stage": true, "gradient_accumulation_steps": true, "gradient_clipping": true,
		"offload_optimizer_device": true, "offload_param_device": true, "offload_optimizer_nvme_path": true,
		"offload_param_nvme_path": true, "zero3_save_16bit_model": true, "deepspeed_hostfile": true}
	for _, k := range dc.keys {
		if !known[k] {
			im.Ignored = append(im.Ignored, fmt.Sprintf("deepspeed_config.%s: %s", k, dsInlineIgnoredReason(k)))
		}
	}
	im.DeepSpeed = renderJSON(ds)
	return nil
}

func dsInlineIgnoredReason(k string) string {
	switch k {
	case "zero3_init_flag":
		return "a Transformers loading switch (build the model already partitioned); gotrain always builds each rank's partition directly"
	case "deepspeed_multinode_launcher":
		return "gotrain launch picks ssh or srun (--launcher), and refuses pdsh/openmpi/mpich with the equivalent command"
	case "deepspeed_moe_layer_cls_names":
		return "gotrain has no mixture-of-experts layers"
	}
	return "no gotrain equivalent"
}

// precision sets bf16/fp16 from a mixed-precision name (Accelerate's no/fp16/bf16, FSDP's BFLOAT16/FP16).
func (im *Imported) precision(ds *node, mixed, from string) {
	var p string
	switch strings.ToLower(mixed) {
	case "bf16", "bfloat16":
		p = "bf16"
	case "fp16", "float16", "half":
		p = "fp16"
	default:
		return
	}
	b := newObj()
	b.set("enabled", &node{kind: nodeBool, b: true}, pos{})
	ds.set(p, b, pos{})
	im.Mapped = append(im.Mapped, fmt.Sprintf("%s %s → %s.enabled true", from, mixed, p))
}

// fsdp converts FSDP settings (keys with or without the fsdp_ prefix) into ds; prefix names them in messages.
func (im *Imported) fsdp(fc, ds *node, prefix string) error {
	get := func(name string) (*node, string) {
		if v := fc.get("fsdp_" + name); v != nil {
			return v, prefix + "fsdp_" + name
		}
		return fc.get(name), prefix + name
	}
	stage, version := -1, 1
	if v, _ := get("version"); v != nil && v.kind == nodeNumber && v.num == "2" {
		version = 2
	}
	if v, key := get("sharding_strategy"); v != nil {
		s := strings.ToUpper(stringOr(v, ""))
		switch s {
		case "FULL_SHARD", "1":
			stage = 3
		case "SHARD_GRAD_OP", "2":
			stage = 2
		case "NO_SHARD", "3":
			stage = 0
		case "HYBRID_SHARD", "4", "_HYBRID_SHARD_ZERO2", "HYBRID_SHARD_ZERO2", "5":
			return fmt.Errorf("%s:%d: %s %s shards within each node and replicates across nodes; gotrain's ZeRO partitions over every rank of the job and has no hybrid mode. Use FULL_SHARD (ZeRO-3) or SHARD_GRAD_OP (ZeRO-2) across all ranks, or ZeRO-3 on one node",
				im.File, v.line, key, s)
		default:
			return fmt.Errorf("%s:%d: %s %q is not an FSDP sharding strategy (FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD)", im.File, v.line, key, s)
		}
		im.Mapped = append(im.Mapped, fmt.Sprintf("%s %s → zero_optimization.stage %d", key, s, stage))
	}
	if v, key := get("reshard_after_forward"); v != nil && v.kind == nodeBool && stage < 0 {
		stage = 2
		if v.b {
			stage = 3
		}
		im.Mapped = append(im.Mapped, fmt.Sprintf("%s %v (FSDP2) → zero_optimization.stage %d", key, v.b, stage))
	}
	if stage < 0 {
		stage = 3 // FSDP's default is FULL_SHARD
		im.Mapped = append(im.Mapped, fmt.Sprintf("no sharding strategy: FSDP's default FULL_SHARD → zero_optimization.stage 3 (FSDP version %d)", version))
	}
	zo := newObj()
	zo.set("stage", num(strconv.Itoa(stage)), pos{})
	if v, key := get("offload_params"); v != nil && v.kind == nodeBool && v.b {
		cpu := func() *node { o := newObj(); o.set("device", str("cpu"), pos{}); return o }
		zo.set("offload_optimizer", cpu(), pos{})
		if stage == 3 {
			zo.set("offload_param", cpu(), pos{})
			im.Mapped = append(im.Mapped, key+" true → zero_optimization.offload_optimizer and offload_param on cpu")
		} else {
			im.Mapped = append(im.Mapped, key+" true → zero_optimization.offload_optimizer on cpu (parameter offload needs stage 3)")
		}
	}
	ds.set("zero_optimization", zo, pos{})
	if v, key := get("activation_checkpointing"); v != nil && v.kind == nodeBool && v.b {
		ds.set("activation_checkpointing", newObj(), pos{})
		im.Mapped = append(im.Mapped, key+" true → activation_checkpointing {}")
	}
	if v, key := get("mixed_precision"); v != nil {
		mp := stringOr(v, "")
		if v.kind == nodeObject {
			mp = stringOr(v.get("param_dtype"), "")
		}
		im.precision(ds, mp, key)
	}
	mapped := map[string]bool{"version": true, "sharding_strategy": true, "reshard_after_forward": true, "offload_params": true,
		"activation_checkpointing": true, "mixed_precision": true}
	for _, k := range fc.keys {
		name := strings.TrimPrefix(k, "fsdp_")
		if !mapped[name] {
			im.Ignored = append(im.Ignored, fmt.Sprintf("%s%s: %s", prefix, k, fsdpIgnoredReason(name)))
		}
	}
	return nil
}

// fsdpIgnoredReason says why an FSDP setting has no gotrain equivalent.
func fsdpIgnoredReason(name string) string {
	switch name {
	case "auto_wrap_policy", "transformer_layer_cls_to_wrap", "min_num_params", "wrap_policy":
		return "gotrain's ZeRO-3 gathers and releases the parameters of each transformer block by itself; there is no module wrapping to choose"
	case "backward_prefetch", "backward_prefetch_policy", "forward_prefetch":
		return "gotrain prefetches the next block's parameters at stage 3 as DeepSpeed does (stage3_prefetch_bucket_size)"
	case "state_dict_type":
		return "gotrain checkpoints are per parameter and reshardable; export writes full Hugging Face safetensors"
	case "sync_module_states", "cpu_ram_efficient_loading":
		return "every rank builds or loads its own partition from the same seed or file"
	case "use_orig_params":
		return "a torch.compile and optimizer-param-group switch; gotrain has neither"
	case "cuda_graphs", "limit_all_gathers":
		return "a PyTorch runtime detail with no gotrain counterpart"
	}
	return "not an FSDP setting gotrain knows"
}

func newObj() *node        { return &node{kind: nodeObject} }
func str(s string) *node   { return &node{kind: nodeString, str: s} }
func num(lit string) *node { return &node{kind: nodeNumber, num: lit} }

// renderJSON writes n as indented JSON with keys in their order, ending in a newline.
func renderJSON(n *node) []byte {
	var b bytes.Buffer
	writeIndented(&b, n, "")
	b.WriteByte('\n')
	return b.Bytes()
}

func writeIndented(b *bytes.Buffer, n *node, indent string) {
	switch n.kind {
	case nodeObject:
		if len(n.keys) == 0 {
			b.WriteString("{}")
			return
		}
		b.WriteString("{\n")
		for i, k := range n.keys {
			b.WriteString(indent + "  " + quoteJSON(k) + ": ")
			writeIndented(b, n.vals[i], indent+"  ")
			if i < len(n.keys)-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "}")
	default:
		b.WriteString(n.compact())
	}
}
