# gotrain for GPU hosts: `make docker`, or
#
#   docker build -t gotrain .
#   docker run --gpus all --rm gotrain doctor
#   docker run --gpus all --rm --ipc=host -v gotrain-cache:/var/cache/gotrain -v "$PWD":/workspace \
#       gotrain --config ds_zero3.json --data 'data/train_*.bin'
#
# The binary loads every native library at run time and builds without any
# of them. In the running container:
#   libcuda.so.1, libnvidia-ml.so.1  the host driver's, mounted by the NVIDIA
#                                    Container Toolkit (--gpus)
#   cuBLAS/cuBLASLt, NVRTC           the CUDA runtime image (cuda-libraries)
#   NCCL 2 (libnccl.so.2)            the CUDA runtime image (libnccl2)
#   OpenBLAS                         installed below, for CPU ranks and offload
#
# CUDA_IMAGE picks the CUDA major. The default, CUDA 12.8 on Ubuntu 24.04,
# runs on drivers from 570 on (the image's NVIDIA_REQUIRE_CUDA has the
# toolkit refuse older ones; pick an older 12.x runtime image for those).
# For CUDA 13 (driver 580 or newer):
#   docker build --build-arg CUDA_IMAGE=nvidia/cuda:13.0.1-runtime-ubuntu24.04 -t gotrain:cu13 .
# gotrain never loads a library whose CUDA major is newer than the driver's,
# so a CUDA 13 image on a CUDA 12 driver finds no cuBLAS or NVRTC.
#
# glibc: the Go stage is Debian 12 (glibc 2.36) and the runtime image must
# not be older than what the binary asks for. It asks for symbols up to
# GLIBC_2.34 only, so Ubuntu 24.04 (2.39) and 22.04 (2.35) images both run
# it; a base older than glibc 2.34 (Ubuntu 20.04) does not.
ARG CUDA_IMAGE=nvidia/cuda:12.8.1-runtime-ubuntu24.04

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# As the Makefile builds: Go 1.26's simd experiment gives the CPU backend its
# AVX-512 softmax and exp loops, and go-nvml's calls of deprecated NVML
# symbols would otherwise warn. cgo stays on: the dlopen loaders and
# go-nvml need it.
ENV GOEXPERIMENT=simd CGO_CFLAGS="-O2 -g -Wno-deprecated-declarations" CGO_ENABLED=1
RUN go build -trimpath -ldflags "-X main.Version=${VERSION}" -o /out/gotrain ./cmd/gotrain

FROM ${CUDA_IMAGE}
# Ubuntu 24.04 images already have uid and gid 1000 (user and group
# "ubuntu"); they are removed so that gotrain runs as uid 1000 on every base.
# /workspace belongs to it, for runs without a mounted directory.
# The kernel cache directory is world-writable (sticky, as /tmp) so that
# `docker run --user "$(id -u):$(id -g)"` can write it too.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libopenblas0-pthread openssh-client \
    && rm -rf /var/lib/apt/lists/* \
    && if old=$(getent passwd 1000 | cut -d: -f1) && [ -n "$old" ]; then userdel "$old" && rm -rf "/home/$old"; fi \
    && if grp=$(getent group 1000 | cut -d: -f1) && [ -n "$grp" ]; then groupdel "$grp"; fi \
    && useradd --create-home --uid 1000 --user-group --shell /bin/bash gotrain \
    && install -d -o gotrain -g gotrain /workspace \
    && install -d -m 1777 /var/cache/gotrain
COPY --from=build /out/gotrain /usr/local/bin/gotrain
# The default configs are also inside the binary; these copies are for
# reading and editing (docker run ... cat /opt/gotrain/configs/<name>.json).
COPY configs/*.json /opt/gotrain/configs/
# Scripts that need no Go: gpu-check.sh (and the PyTorch baseline it runs
# when a python with torch is present), run as
#   docker run --gpus all --rm --ipc=host -v gotrain-cache:/var/cache/gotrain -v "$PWD":/workspace \
#       --user "$(id -u):$(id -g)" --entrypoint /opt/gotrain/scripts/gpu-check.sh gotrain
# which leaves gpu-check-out/ in the current directory.
COPY scripts/gpu-check.sh scripts/bench_pytorch_gpu.py /opt/gotrain/scripts/
# NVRTC compiles the kernels for the GPU's sm_XY at start-up and caches the
# CUBINs under $GOTRAIN_CACHE/kernels; on a volume (-v gotrain-cache:/var/cache/gotrain)
# only the first container of each image and GPU model pays for compiling.
ENV GOTRAIN_CACHE=/var/cache/gotrain
VOLUME /var/cache/gotrain
USER gotrain
WORKDIR /workspace
# The Prometheus metrics endpoint.
EXPOSE 9400
ENTRYPOINT ["gotrain"]
CMD ["doctor"]
