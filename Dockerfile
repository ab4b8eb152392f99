# gotrain for GPU hosts: `make docker`, or
#
#   docker build -t gotrain .
#   docker run --gpus all --rm -v "$PWD":/workspace gotrain doctor
#   docker run --gpus all --rm -v "$PWD":/workspace gotrain --config ds_zero3.json --data 'data/train_*.bin'
#
# The binary loads every native library at run time and builds without any
# of them. In the running container:
#   libcuda.so.1, libnvidia-ml.so.1  the host driver's, mounted by the NVIDIA
#                                    Container Toolkit (--gpus)
#   cuBLAS/cuBLASLt 12, NVRTC 12     the CUDA runtime image (cuda-libraries)
#   NCCL 2 (libnccl.so.2)            the CUDA runtime image (libnccl2)
#   OpenBLAS                         installed below, for CPU ranks and offload
# The image's NVIDIA_REQUIRE_CUDA has the toolkit refuse a host driver too old
# for CUDA 12.4; pick another CUDA_IMAGE (a 12.x runtime) for older drivers.
# The Go stage is Debian 12 (glibc 2.36), but the binary only needs symbols up
# to GLIBC_2.34, which Ubuntu 22.04 (2.35) has.
ARG CUDA_IMAGE=nvidia/cuda:12.4.1-runtime-ubuntu22.04

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# cgo stays on: the dlopen loaders and go-nvml need it.
RUN CGO_ENABLED=1 go build -trimpath -ldflags "-X main.Version=${VERSION}" -o /out/gotrain ./cmd/gotrain

FROM ${CUDA_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends libopenblas0-pthread openssh-client \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --create-home --uid 1000 --shell /bin/bash gotrain
COPY --from=build /out/gotrain /usr/local/bin/gotrain
# The default configs are also inside the binary; these copies are for
# reading and editing (docker run ... cat /opt/gotrain/configs/<name>.json).
COPY configs/*.json /opt/gotrain/configs/
USER gotrain
WORKDIR /workspace
# The Prometheus metrics endpoint.
EXPOSE 9400
ENTRYPOINT ["gotrain"]
CMD ["doctor"]
