# gotrain for GPU hosts. The binary loads libcuda (from the host, through the
# NVIDIA container toolkit), cuBLAS, NCCL and NVRTC (from this CUDA runtime
# image) at run time; it builds without any of them.
#
#   docker build -t gotrain .
#   docker run --gpus all --rm -v $PWD:/work -w /work gotrain --config ds_zero3.json ...
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build

FROM nvidia/cuda:12.4.1-runtime-ubuntu22.04
RUN apt-get update && apt-get install -y --no-install-recommends libopenblas0-pthread openssh-client \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/bin/gotrain /usr/local/bin/gotrain
ENTRYPOINT ["gotrain"]
