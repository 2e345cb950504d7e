#!/usr/bin/env bash
# setup.sh — install what train_gpt needs from Debian, skipping what is already there.
#
#   scripts/setup.sh          build + run: BLAS, CLI11, nlohmann-json, the bundled corpus (bible-kjv)
#   scripts/setup.sh --test   also GoogleTest and PyTorch (the reference the tests compare against)
#
# The CUDA toolkit (nvcc, cuBLASLt, NCCL) is expected to be installed already (it is not a
# Debian-main package); the script checks for it and says so if it is missing.
set -euo pipefail

packages=(g++ make libopenblas-dev libcli11-dev nlohmann-json3-dev bible-kjv)
if [[ "${1:-}" == "--test" ]]; then
    packages+=(libgtest-dev python3-torch python3-numpy)
fi

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if (( ${#missing[@]} > 0 )); then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null || { echo "setup: need root (or sudo) to install ${missing[*]}" >&2; exit 1; }
        sudo_cmd=(sudo)
    fi
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    echo "setup: all packages present"
fi

if ! command -v nvcc >/dev/null && [[ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]]; then
    echo "setup: nvcc not found (PATH or \$CUDA_HOME/bin): install the CUDA toolkit to build train_gpt.cu" >&2
    exit 1
fi
