#!/usr/bin/env bash
# The first command to run on a GPU host with a prebuilt gotrain (no Go
# needed there): every GPU-facing check in one go, each under its own
# timeout, all within 9 minutes, ending in a summary table.
#
#   scripts/gpu-check.sh                # on a GPU host (make gpu-check)
#   scripts/gpu-check.sh --dry-run      # the same plumbing on the CPU with tiny shapes (make gpu-check DRY_RUN=1)
#   scripts/gpu-check.sh --only bench-gpt2,torch-gpt2   # rerun some steps
#   scripts/gpu-check.sh --list         # the steps and their timeouts
#
# Steps: the libraries and GPUs gotrain finds (doctor), every op against the
# CPU backend (doctor --selftest), tiny models trained on the GPU against
# the CPU backend (doctor --e2e, fp32 and bf16), measured training
# throughput of GPT-2 124M (B8 T1024) and Qwen3-0.6B (B4 T4096) in bf16
# beside the cost model's bound (bench --dry-run) and PyTorch on the same
# shapes (scripts/bench_pytorch_gpu.py, when a python with torch is found),
# a ZeRO-3 run through the launcher, and a one-rank NCCL doctor --comm.
#
# Environment: GOTRAIN (default: bin/gotrain of this repository, else
# gotrain on PATH); PYTHON (a python with torch; default: python3 on PATH,
# then common virtualenv places); OUT (the output directory, default
# gpu-check-out; a GPU runner returns what is written under $OUT);
# GPU_CHECK_BUDGET (seconds for all steps, default 540).
#
# Writes OUT/summary.md (also printed at the end) and one log per step,
# OUT/NN-step.log, starting with the command line. Nothing is downloaded.
# A failed step never stops the script; the exit status is 1 when a
# required step failed or timed out, 2 when nothing could run.
set -euo pipefail

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

dry_run=0
only=""
list=0
while (($#)); do
	case $1 in
	--dry-run) dry_run=1 ;;
	--only) only=${2:?--only needs a comma-separated list of steps}; shift ;;
	--only=*) only=${1#--only=} ;;
	--out) OUT=${2:?--out needs a directory}; shift ;;
	--out=*) OUT=${1#--out=} ;;
	--list) list=1 ;;
	-h | --help) usage; exit 0 ;;
	*) echo "gpu-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-gpu-check-out}
budget=${GPU_CHECK_BUDGET:-540}

# ---- the steps ---------------------------------------------------------------
# name, timeout in seconds, required (1) or informative (0). On an H200 the
# timeouts sum to 525 s; GPU_CHECK_BUDGET caps the total besides, so one slow
# step shortens the last ones instead of overrunning.
steps=(
	"doctor 20 1"
	"selftest 100 1"
	"e2e 35 1"
	"e2e-bf16 35 1"
	"bench-gpt2 45 1"
	"bench-qwen3 60 1"
	"zero3-train 45 1"
	"comm 20 1"
	"torch-gpt2 45 0"
	"torch-qwen3 60 0"
	"cost-gpt2 20 1"
	"cost-qwen3 40 1"
)
step_names=()
declare -A limit_of required_of
for s in "${steps[@]}"; do
	read -r n t r <<<"$s"
	step_names+=("$n")
	limit_of[$n]=$t required_of[$n]=$r
done

if ((list)); then
	printf '%-12s %8s %s\n' step timeout required
	for s in "${steps[@]}"; do
		read -r n t r <<<"$s"
		printf '%-12s %7ss %s\n' "$n" "$t" "$([ "$r" = 1 ] && echo yes || echo no)"
	done
	exit 0
fi
if [ -n "$only" ]; then
	for n in ${only//,/ }; do
		case " ${step_names[*]} " in
		*" $n "*) ;;
		*) echo "gpu-check: --only $n: no such step; the steps are ${step_names[*]}" >&2; exit 2 ;;
		esac
	done
fi
selected() { [ -z "$only" ] || case ",$only," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

if ! command -v timeout >/dev/null; then
	echo "gpu-check: needs timeout(1) (coreutils)" >&2
	exit 2
fi

# ---- gotrain -----------------------------------------------------------------
gotrain=${GOTRAIN:-}
if [ -z "$gotrain" ]; then
	if [ -x "$repo/bin/gotrain" ]; then
		gotrain=$repo/bin/gotrain
	else
		gotrain=$(command -v gotrain || true)
	fi
fi
if [ -z "$gotrain" ] || ! [ -x "$gotrain" ]; then
	echo "gpu-check: no gotrain binary: set GOTRAIN, or build bin/gotrain where Go is (make build) and copy the tree" >&2
	exit 2
fi

mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
# Run inside a checkout, the logs stay out of git status (and out of what
# is copied along with the tree).
[ -e "$OUT/.gitignore" ] || echo '*' >"$OUT/.gitignore"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# clock prints the time in seconds, with a fraction where bash has
# EPOCHREALTIME (5.0+), whose decimal mark follows the locale.
clock() {
	local t=${EPOCHREALTIME:-$SECONDS}
	printf '%s' "${t/,/.}"
}
t_start=$(clock)
# now_s prints the seconds since the start, to a tenth.
now_s() { awk -v a="$t_start" -v b="$(clock)" 'BEGIN { printf "%.1f", b - a }'; }

# ---- python with torch ---------------------------------------------------------
# PYTHON when set (and only it); else python3 on PATH, then the places
# virtualenvs and conda usually live. The first that imports torch wins.
py="" py_info="" py_tried=()
python_candidates() {
	if [ -n "${PYTHON:-}" ]; then
		echo "$PYTHON"
		return
	fi
	local p
	for p in python3 python; do command -v "$p" || true; done
	local home=${HOME:-/nonexistent}
	for p in "${VIRTUAL_ENV:-}" "${CONDA_PREFIX:-}" "$repo/.venv" "$repo/venv" "$home/.venv" "$home/venv" \
		/opt/venv /venv /workspace/.venv /workspace/venv /opt/conda "$home"/*/ /opt/*/ /usr; do
		p=${p%/}
		[ -n "$p" ] && [ -x "$p/bin/python3" ] && echo "$p/bin/python3"
	done
	return 0
}
find_python() {
	local p seen=" "
	while IFS= read -r p; do
		case $seen in *" $p "*) continue ;; esac
		seen+="$p "
		py_tried+=("$p")
		if py_info=$(timeout 30 "$p" -c 'import sys, torch; print("torch %s, CUDA %s, GPU %s" % (torch.__version__, torch.version.cuda, torch.cuda.is_available()))' 2>/dev/null); then
			py=$p
			return 0
		fi
		# Enough places tried: the search must stay a small part of the budget.
		[ "${#py_tried[@]}" -lt 12 ] || return 0
	done < <(python_candidates)
	return 0
}
# Also with --only and no torch step: the virtualenv below matters to gotrain.
find_python

# gotrain looks for the CUDA libraries of pip wheels in $VIRTUAL_ENV and in
# the site-packages of python3 on PATH. When the python that has torch (and
# so those wheels) is a virtualenv neither names, say so to gotrain as
# activating it would; nothing else about the environment changes.
venv_note=""
if [ -n "$py" ] && [ -z "${VIRTUAL_ENV:-}" ]; then
	venv=$(dirname "$(dirname "$py")")
	if [ -f "$venv/pyvenv.cfg" ] && [ "$(command -v python3 || true)" != "$venv/bin/python3" ]; then
		export VIRTUAL_ENV=$venv
		venv_note="VIRTUAL_ENV=$venv (the virtualenv of the python with torch, as activating it would set)"
	fi
fi

# ---- shapes and arguments per mode ---------------------------------------------
if ((dry_run)); then
	device=cpu
	# A Qwen3 shaped like the real one (q/k norms, GQA, SwiGLU, tied head),
	# small enough for a 2-core machine.
	qwen3=$OUT/qwen3-tiny-config.json
	cat >"$qwen3" <<'EOF'
{"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "intermediate_size": 192,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "vocab_size": 1024,
 "tie_word_embeddings": true, "max_position_embeddings": 256, "rope_theta": 1000000, "rms_norm_eps": 1e-6}
EOF
	gpt2=gpt2-tiny gpt2_shape=(2 64 1) qwen3_shape=(2 64 1) warmup=1
	train_model=$qwen3 train_seq=64 e2e_steps=2
	e2e_args=(--shapes small)
	doctor_args=(--seconds 0.2)
	selftest_args=(--device cpu --gemm-size 256 --collective-mib 1)
	comm_args=(--comm-sizes "4KiB,1MiB" --comm-iters 2)
else
	device=cuda
	qwen3="qwen3-0.6b"
	# B, T and timed steps: Qwen3's step is about 15 times GPT-2's.
	gpt2=gpt2 gpt2_shape=(8 1024 10) qwen3_shape=(4 4096 5) warmup=2
	train_model=gpt2 train_seq=1024 e2e_steps=5
	e2e_args=()
	doctor_args=()
	selftest_args=()
	comm_args=(--comm-sizes "4KiB,1MiB,64MiB" --comm-iters 5)
fi
# The cost model prices the GPU it is told: h200 where this gotrain knows
# it, else h100 (the same bf16 peak, less memory bandwidth).
cost_gpu=h100
bench_help=$(timeout 20 "$gotrain" bench --help 2>&1 || true)
case $bench_help in *h200*) cost_gpu=h200 ;; esac
zero3_config=$repo/configs/ds_zero3.json
[ -f "$zero3_config" ] || zero3_config=/opt/gotrain/configs/ds_zero3.json
# configs/ds_zero3.json warms up for 20 steps and gotrain refuses a run that
# ends inside its warmup: 21 steps is the shortest run of that file.
zero3_steps=21

# ---- running a step ----------------------------------------------------------
n_run=0 failed=0
rows=()
declare -A tps mfu bound torch_tps torch_mfu torch_how

# note_escape makes one line safe for a Markdown table cell.
note_escape() { tr '\n' ' ' | sed -e 's/|/\\|/g' -e 's/[[:space:]]*$//' | cut -c1-220; }

# error_note LOG: the line that says why a command failed: gotrain's own
# error (the first, which a rank printed, not the launcher's "rank 0
# exited"), else the last line the command wrote (not the command line at
# the top of the log nor the exit status under it).
error_note() {
	local l
	l=$(sed '1d;$d' "$1" | grep -E '^gotrain: ' | grep -vE 'rank [0-9]+ \(pid [0-9]+\) exited' | head -1 || true)
	[ -n "$l" ] || l=$(sed '1d;$d' "$1" | grep -v '^[[:space:]]*$' | tail -1 || true)
	printf '%s' "${l:-no output}"
}

# run_step NAME CHECK CMD...: runs CMD under the step's timeout (the steps
# table) into its log and records a row. CHECK (a function) then reads the
# log, and may set status and note.
status="" note=""
run_step() {
	local name=$1 check=$2
	local limit=${limit_of[$name]} required=${required_of[$name]}
	shift 2
	selected "$name" || return 0
	n_run=$((n_run + 1))
	local log
	log=$OUT/$(printf '%02d' "$n_run")-$name.log
	{
		printf '$'
		printf ' %q' "$@"
		printf '\n'
	} >"$log"
	local left t0 rc=0
	left=$(awk -v b="$budget" -v e="$(now_s)" 'BEGIN { printf "%d", b - e }')
	if ((left < limit)); then limit=$left; fi
	status="" note=""
	if ((limit < 5)); then
		status=FAIL note="not run: the ${budget}s budget was spent"
		echo "$note" >>"$log"
		record "$name" "$required" 0 "$log"
		return 0
	fi
	t0=$(now_s)
	timeout --kill-after=5 "$limit" "$@" >>"$log" 2>&1 </dev/null || rc=$?
	local secs
	secs=$(awk -v a="$t0" -v b="$(now_s)" 'BEGIN { printf "%.1f", b - a }')
	echo "exit status $rc after ${secs}s" >>"$log"
	if ((rc == 124 || rc == 137)); then
		status=TIMEOUT note="timed out after ${limit}s; $(error_note "$log")"
	elif ((rc != 0)); then
		status=FAIL note=$(error_note "$log")
	else
		status=PASS note=""
	fi
	# A check runs with errexit off (it is tested by ||): a grep that finds
	# nothing must not end the script.
	"$check" "$log" "$rc" || true
	record "$name" "$required" "$secs" "$log"
}

# record NAME REQUIRED SECONDS LOG: one summary row and a progress line.
record() {
	local req=no
	if [ "$2" = 1 ]; then
		req=yes
		case $status in FAIL | TIMEOUT) failed=$((failed + 1)) ;; esac
	fi
	note=$(printf '%s' "$note" | note_escape)
	rows+=("| $1 | $req | $status | $3 | $note |")
	printf '%-12s %-7s %6ss  %s\n' "$1" "$status" "$3" "$note"
	write_summary partial || true
}

# ---- checks: each reads a step's log (after exit 0 unless it says so) ------------
check_doctor() {
	[ "$status" = PASS ] || return 0
	local gpus
	gpus=$(grep -E '^gpus[[:space:]]+[0-9]+' "$1" | head -1 || true)
	if ((dry_run)); then
		note="no GPU needed (dry run)"
	elif ! grep -qE '^gpus[[:space:]]+[1-9]' "$1"; then
		status=FAIL note="gotrain found no usable GPU: $(grep -E '^cuda driver' "$1" | head -1 || true)"
	else
		note="$gpus; $(grep -E '^  gpu ' "$1" | head -1 | sed 's/^ *//' || true)"
	fi
}

check_selftest() {
	if [ "$status" = PASS ]; then
		local g
		g=$(grep -E '^gemm ' "$1" | grep -oE '[0-9.]+ TFLOP/s' | head -1 || true)
		note="$(grep -E 'selftest passed' "$1" | tail -1 || true)${g:+; bf16 GEMM $g}"
	elif ((dry_run)) && [ "$status" = FAIL ] && grep -qiE 'needs a gpu|no gpu|cuda driver not available' "$1"; then
		status=SKIP note="needs a GPU (dry run): $note"
	fi
}

check_tail() {
	[ "$status" = PASS ] || return 0
	note=$(sed '1d;$d' "$1" | grep -v '^[[:space:]]*$' | tail -1 || true)
}

# check_bench KEY: tokens/s and MFU of `gotrain bench`.
check_bench() {
	[ "$status" = PASS ] || return 0
	local l key=$3
	l=$(grep -E '^step [0-9.]+ ms \| [0-9]+ tokens/s' "$1" | tail -1 || true)
	if [ -z "$l" ]; then
		status=FAIL note="no 'step ... tokens/s' line in the output"
		return 0
	fi
	tps[$key]=$(sed -E 's/^step [0-9.]+ ms \| ([0-9]+) tokens\/s.*/\1/' <<<"$l")
	mfu[$key]=$(grep -oE 'MFU [0-9.]+%' <<<"$l" | sed 's/MFU //' || true)
	note="${tps[$key]} tokens/s, MFU ${mfu[$key]:-n/a} (step $(grep -oE '^step [0-9.]+ ms' <<<"$l" | sed 's/^step //'))"
}
check_bench_gpt2() { check_bench "$1" "$2" gpt2; }
check_bench_qwen3() { check_bench "$1" "$2" qwen3; }

# check_cost KEY: the cost model's step time and MFU bound.
check_cost() {
	[ "$status" = PASS ] || return 0
	local key=$3 ms m
	ms=$(grep -oE 'step [0-9.]+ ms at the peaks' "$1" | grep -oE '[0-9.]+' | head -1 || true)
	m=$(grep -oE 'MFU at most [0-9.]+%' "$1" | grep -oE '[0-9.]+%' | head -1 || true)
	if [ -z "$ms" ] || [ -z "$m" ]; then
		status=FAIL note="no step time or MFU bound in the cost model's output"
		return 0
	fi
	bound[$key]="≥ $ms ms, MFU ≤ $m"
	note="$cost_gpu: step ≥ $ms ms, MFU ≤ $m (cost model, an upper bound, not a measurement)"
}
check_cost_gpt2() { check_cost "$1" "$2" gpt2; }
check_cost_qwen3() { check_cost "$1" "$2" qwen3; }

# result_field LINE KEY: the value of KEY=value in a RESULT line.
result_field() { grep -oE "(^| )$2=[^ ]+" <<<"$1" | sed "s/^ *$2=//" || true; }

# check_torch KEY: the RESULT line of bench_pytorch_gpu.py.
check_torch() {
	[ "$status" = PASS ] || return 0
	local key=$3 l
	l=$(grep -E '^RESULT ' "$1" | tail -1 || true)
	if [ -z "$l" ]; then
		status=FAIL note="no RESULT line in the output"
		return 0
	fi
	torch_tps[$key]=$(result_field "$l" tokens_per_s)
	torch_mfu[$key]=$(result_field "$l" mfu_pct)
	torch_how[$key]="$(result_field "$l" impl), attention $(result_field "$l" attn)"
	local m=${torch_mfu[$key]}
	[[ $m == *[0-9] ]] && m+=%
	note="${torch_tps[$key]} tokens/s, MFU ${m:-n/a} (step $(result_field "$l" step_ms) ms; ${torch_how[$key]})"
}
check_torch_gpt2() { check_torch "$1" "$2" gpt2; }
check_torch_qwen3() { check_torch "$1" "$2" qwen3; }

check_train() {
	local m=$scratch/zero3/metrics.jsonl
	[ -f "$m" ] && cp "$m" "$OUT/zero3-train.metrics.jsonl"
	[ "$status" = PASS ] || return 0
	if ! [ -f "$m" ] || ! tail -1 "$m" | grep -q "\"step\":${zero3_steps}[,}]"; then
		status=FAIL note="exit 0 but metrics.jsonl does not reach step $zero3_steps"
		return 0
	fi
	note=$(grep -E '^done: ' "$1" | tail -1 | sed 's/ | weights .*//' || true)
	note="ZeRO-3 ${note:-$zero3_steps steps}"
}

check_comm() {
	[ "$status" = PASS ] || return 0
	note=$(grep -E 'all results exact' "$1" | tail -1 | sed 's/^# *//' || true)
	local t
	t=$(grep -oE 'ranks over [a-z]+' "$1" | head -1 || true)
	note="${t:+$t: }${note:-exit 0}"
}

skip_torch() {
	local name=$1 log
	selected "$name" || return 0
	n_run=$((n_run + 1))
	log=$OUT/$(printf '%02d' "$n_run")-$name.log
	if [ -n "${PYTHON:-}" ]; then
		status=SKIP note="PYTHON=$PYTHON cannot import torch"
	else
		status=SKIP note="no python with torch (tried ${py_tried[*]:-none})"
	fi
	echo "$note" >"$log"
	record "$name" "${required_of[$name]}" 0 "$log"
}

# throughput_row KEY MODEL "B T": one row of the throughput table; — where
# a step did not run or failed.
throughput_row() {
	local k=$1 r tm="—"
	r=$(awk -v a="${tps[$k]:-}" -v b="${torch_tps[$k]:-}" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else printf "—" }')
	if [[ ${torch_mfu[$k]:-} == *[0-9] ]]; then
		tm="${torch_mfu[$k]}% (${torch_how[$k]})"
	elif [ -n "${torch_mfu[$k]:-}" ]; then
		tm="${torch_mfu[$k]} (${torch_how[$k]})"
	fi
	echo "| $2 | ${3/ / × } | ${tps[$k]:-—} | ${mfu[$k]:-—} | ${bound[$k]:-—} | ${torch_tps[$k]:-—} | $tm | $r |"
}

# write_summary final|partial: OUT/summary.md from the rows so far, after
# every step, so that a run cut short still leaves one.
write_summary() {
	local log="" f
	{
		echo "# gotrain GPU check: $mode"
		echo
		echo "$(date -u '+%Y-%m-%d %H:%M UTC') | $version | $(now_s)s of a ${budget}s budget"
		if [ -n "$smi" ]; then echo "nvidia-smi: $smi"; fi
		if [ -n "$py" ]; then echo "python: $py ($py_info)"; fi
		if [ -n "$venv_note" ]; then echo "$venv_note"; fi
		echo
		echo "| step | required | status | seconds | result |"
		echo "|---|---|---|---|---|"
		printf '%s\n' "${rows[@]}"
		echo
		echo "Throughput, bf16 (gotrain bench against scripts/bench_pytorch_gpu.py; the bound is the cost model's for $cost_gpu):"
		echo
		echo "| model | B × T | gotrain tokens/s | gotrain MFU | cost model bound | PyTorch tokens/s | PyTorch MFU | gotrain ÷ PyTorch |"
		echo "|---|---|---|---|---|---|---|---|"
		throughput_row gpt2 "$gpt2" "${gpt2_shape[0]} ${gpt2_shape[1]}"
		throughput_row qwen3 "$(basename "$qwen3")" "${qwen3_shape[0]} ${qwen3_shape[1]}"
		echo
		echo "Libraries and GPUs (gotrain doctor):"
		echo
		echo '```'
		for f in "$OUT"/[0-9][0-9]-doctor.log; do [ -f "$f" ] && log=$f; done
		if [ -n "$log" ]; then
			# From the first library line on; the whole report where its
			# lines are named otherwise.
			f=$(sed -n '/^cuda driver/,$p' "$log")
			[ -n "$f" ] || f=$(sed '1d' "$log")
			printf '%s\n' "$f" | grep -v '^exit status ' | cut -c1-300 | head -40 || true
		else
			echo "(doctor not run)"
		fi
		echo '```'
		echo
		if [ "$1" != final ]; then
			echo "In progress: $n_run step(s) so far (this file is rewritten after each)."
		elif ((failed)); then
			echo "$failed required step(s) failed: see the logs in $OUT."
		else
			echo "Every required step passed or was skipped."
		fi
	} >"$OUT/summary.md.tmp"
	mv "$OUT/summary.md.tmp" "$OUT/summary.md"
}

# ---- the run -----------------------------------------------------------------
version=$(timeout 10 "$gotrain" version 2>&1 | head -1 || true)
smi=""
if command -v nvidia-smi >/dev/null; then
	smi=$(timeout 10 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -2 | tr '\n' ' ' || true)
fi
mode="GPU (--device cuda)"
((dry_run)) && mode="dry run (--device cpu, tiny shapes)"
echo "gpu-check: $mode; gotrain $gotrain; output $OUT"
[ -n "$venv_note" ] && echo "gpu-check: $venv_note"
printf '%-12s %-7s %7s  %s\n' step status seconds result

run_step doctor check_doctor "$gotrain" doctor "${doctor_args[@]}"
run_step selftest check_selftest "$gotrain" doctor --selftest "${selftest_args[@]}"
run_step e2e check_tail "$gotrain" doctor --e2e --device "$device" --e2e-steps "$e2e_steps" "${e2e_args[@]}"
run_step e2e-bf16 check_tail "$gotrain" doctor --e2e --device "$device" --e2e-steps "$e2e_steps" --dtype bf16 "${e2e_args[@]}"
run_step bench-gpt2 check_bench_gpt2 "$gotrain" bench --device "$device" --model "$gpt2" \
	--batch "${gpt2_shape[0]}" --seq-len "${gpt2_shape[1]}" --steps "${gpt2_shape[2]}" --dtype bf16
run_step bench-qwen3 check_bench_qwen3 "$gotrain" bench --device "$device" --model "$qwen3" \
	--batch "${qwen3_shape[0]}" --seq-len "${qwen3_shape[1]}" --steps "${qwen3_shape[2]}" --dtype bf16
run_step zero3-train check_train "$gotrain" launch --master_port 0 --nproc 1 train --config "$zero3_config" \
	--model "$train_model" --data synthetic --seq-len "$train_seq" --max-steps "$zero3_steps" --device "$device" \
	--output-dir "$scratch/zero3" --metrics-addr off
run_step comm check_comm "$gotrain" launch --master_port 0 --nproc 1 doctor --comm --device "$device" "${comm_args[@]}"
if [ -n "$py" ]; then
	run_step torch-gpt2 check_torch_gpt2 "$py" "$repo/scripts/bench_pytorch_gpu.py" --device "$device" \
		--model "$gpt2" --batch "${gpt2_shape[0]}" --seq "${gpt2_shape[1]}" --steps "${gpt2_shape[2]}" --warmup "$warmup" \
		--dtype bf16
	run_step torch-qwen3 check_torch_qwen3 "$py" "$repo/scripts/bench_pytorch_gpu.py" --device "$device" \
		--model "$qwen3" --batch "${qwen3_shape[0]}" --seq "${qwen3_shape[1]}" --steps "${qwen3_shape[2]}" --warmup "$warmup" \
		--dtype bf16
else
	skip_torch torch-gpt2
	skip_torch torch-qwen3
fi
# bench --dry-run runs nothing on a device: it prices the CUDA backend's
# step, so it takes --device cuda in both modes.
run_step cost-gpt2 check_cost_gpt2 "$gotrain" bench --dry-run --device cuda --gpu "$cost_gpu" --model "$gpt2" \
	--batch "${gpt2_shape[0]}" --seq-len "${gpt2_shape[1]}" --dtype bf16
run_step cost-qwen3 check_cost_qwen3 "$gotrain" bench --dry-run --device cuda --gpu "$cost_gpu" --model "$qwen3" \
	--batch "${qwen3_shape[0]}" --seq-len "${qwen3_shape[1]}" --dtype bf16

write_summary final || echo "gpu-check: could not write $OUT/summary.md" >&2

echo
cat "$OUT/summary.md"
((failed == 0)) || exit 1
