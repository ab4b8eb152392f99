# gotrain — build, run, test. `make help` lists the targets.
GO        ?= go
BIN       ?= bin/gotrain
RUN_DIR   ?= runs/tiny
DATA_DIR  ?= $(RUN_DIR)/data
RUN_STEPS ?= 300
FUZZTIME  ?= 10s
# make test runs every fuzz target (31 of them) this long, to keep the whole
# test under 10 minutes on 2 cores; `make fuzz` runs them FUZZTIME each.
TEST_FUZZTIME ?= 4s
PKGS      := ./...

# Go 1.26's experimental simd package gives the CPU backend its AVX-512 softmax
# and exp loops (5x faster cross-entropy); builds without it run the scalar
# loops, which `make test` checks too.
export GOEXPERIMENT := simd
# go-nvml's generated cgo calls every NVML symbol, deprecated ones included;
# the compiler's warnings about them are noise in every fresh build.
export CGO_CFLAGS := -O2 -g -Wno-deprecated-declarations
DOCKER    ?= docker
IMAGE     ?= gotrain:latest

.PHONY: all build run test fuzz bench lint fmt clean help docker gpu-check

all: build

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

build: ## build bin/gotrain
	$(GO) build -trimpath -o $(BIN) ./cmd/gotrain

run: build ## prepare a corpus from the Go sources, train gpt2-tiny on 2 CPU ranks with ZeRO-2, print falling loss and a sample
	@if [ ! -f $(DATA_DIR)/train_000000.bin ]; then \
	  $(BIN) data prepare --input "$$($(GO) env GOROOT)/src" --ext .go --tokenizer gpt2 \
	    --output $(DATA_DIR) --val-fraction 0.02 --max-docs 4000; fi
	rm -rf $(RUN_DIR)/checkpoints $(RUN_DIR)/metrics.jsonl
	$(BIN) launch --nproc 2 train --config configs/ds_zero2.json --model gpt2-tiny --resume never \
	  --data '$(DATA_DIR)/train_*.bin' --val-data '$(DATA_DIR)/val_*.bin' --shuffle \
	  --seq-len 128 --max-steps $(RUN_STEPS) --eval-every 50 --eval-batches 20 --output-dir $(RUN_DIR)
	$(BIN) plot $(RUN_DIR)
	$(BIN) sample --from $(RUN_DIR)/model.safetensors --prompt "func main() {" --max-new-tokens 64 --seed 1

test: ## unit tests (vector and scalar CPU math), then every fuzz target briefly
	$(GO) test -count=1 $(PKGS)
	GOEXPERIMENT= $(GO) test -count=1 ./backend/cpu/ ./blas/gogemm/
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(TEST_FUZZTIME)

fuzz: ## run each fuzz target for FUZZTIME (retrying only Go 1.26's bare fuzztime-boundary race; see the script)
	GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz.sh

bench: build ## benchmarks: GFLOP/s per op, GEMM roofline, tokens/s and MFU (GPT-2, a Qwen3-shaped model), long-sequence attention memory, ZeRO stage step times, bus bandwidth
	$(BIN) bench --device auto --model gpt2 --batch 4 --seq-len 64 --steps 3 --dtype fp32
	# gpt2-tiny B8 T256 on the CPU with each GEMM (the README's CPU performance table), then bf16 (1.6x fp32 with AVX512_BF16; says why it is slower without)
	$(BIN) bench --device cpu --model gpt2-tiny --batch 8 --seq-len 256 --steps 5 --dtype fp32 --blas go
	-$(BIN) bench --device cpu --model gpt2-tiny --batch 8 --seq-len 256 --steps 5 --dtype fp32 --blas openblas
	$(BIN) bench --device cpu --model gpt2-tiny --batch 8 --seq-len 256 --steps 3 --dtype bf16 --blas go
	# ./blas/ below includes BenchmarkModelShapes: the Go GEMM against OpenBLAS on every model shape, interleaved
	$(BIN) bench --dry-run --gpu h100 --model qwen3-0.6b --batch 4 --seq-len 2048 | tail -2 # the cost model's bound for a Llama-family preset, no weights needed
	$(GO) test -run='^$$' -bench=. -benchtime=3x ./blas/ ./backend/cpu/ ./data/ ./kernels/emu/
	$(GO) test -run='^$$' -bench='Fc|Head|BF16' -benchtime=5x ./blas/gogemm/ # fp32 and bf16 (VDPBF16PS where the CPU has AVX512_BF16) GEMM GFLOP/s on gpt2-tiny's fc and classifier products
	$(GO) test -run='^$$' -bench=. -benchtime=3x ./data/hftok/ # tokenizer load and encode MB/s; ./data/ above gives data prepare MB/s for GPT-2, Qwen3, Llama 3 (those two need scripts/fetch-tokenizers.sh)
	$(GO) test -run='^$$' -bench=. -benchtime=3x ./model/ # forward+backward tokens/s and act-MiB: GPT-2 at T=1024 and 2048 (no T² buffer)
	$(GO) test -run='^$$' -bench=. -benchtime=1x -timeout 30m ./trainer/ # end-to-end tokens/s and MFU: gpt2-tiny, gpt2, a Qwen3-shaped tiny model, and LoRA (r 16, all-linear) on the same Qwen3 shape
	$(GO) test -run='^$$' -bench=Step -benchtime=5x ./zero/
	$(GO) test -run='^$$' -bench=. -benchtime=5x ./comm/tcp/
	@py=$$(for p in python3 /usr/bin/python3; do $$p -c 'import torch' 2>/dev/null && echo $$p && break; done); \
	  if [ -n "$$py" ]; then $$py scripts/bench_pytorch.py --model gpt2-tiny --batch 8 --seq 256 --threads 2; \
	  else echo "PyTorch not installed: skipping the PyTorch baseline (apt-get install python3-torch)"; fi

lint: ## gofmt, go vet, the cgo-confinement check of docs/architecture.md §2, and no file read that could block on a FIFO
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	@sh scripts/check-cgo.sh
	$(GO) test -count=1 -run '^TestEveryFileReadIsRegular$$' ./internal/regularfile/

fmt: ## gofmt -w
	gofmt -w $$(git ls-files '*.go')

# No build dependency: a GPU host often has the copied tree and bin/gotrain
# but no Go. GOTRAIN, PYTHON and OUT pass through to the script.
gpu-check: ## on a GPU host: doctor, selftest, e2e, bench against the cost model and PyTorch, ZeRO-3, NCCL; summary in gpu-check-out/ (DRY_RUN=1: the same on the CPU with tiny shapes)
	GOTRAIN=$${GOTRAIN:-$(BIN)} scripts/gpu-check.sh $(if $(DRY_RUN),--dry-run)

docker: ## build the GPU container image (IMAGE=gotrain:latest) from the Dockerfile
	$(DOCKER) build -t $(IMAGE) --build-arg VERSION=$$(git describe --tags --always --dirty 2>/dev/null || echo dev) .

clean: ## remove build outputs and run directories
	rm -rf bin runs
