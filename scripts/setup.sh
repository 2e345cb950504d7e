#!/usr/bin/env bash
# setup.sh — install what train_gpt needs from Debian, skipping what is already there.
#
#   scripts/setup.sh          build + run: BLAS, CLI11, nlohmann-json, PCRE2, Open MPI, the bundled corpus (bible-kjv)
#   scripts/setup.sh --test   also GoogleTest, clang-14 with libFuzzer and the sanitizers (scripts/fuzz.sh), clang-format
#                             (scripts/check_format.sh),
#                             PyTorch (the reference the tests compare against), matplotlib
#                             (scripts/plot_run.py), pip and tiktoken (PyPI; the oracle of the BPE tests)
#                             and transformers (PyPI; loads the checkpoints) into Debian's python3
#   scripts/setup.sh --study  also matplotlib (scripts/precision_study.sh's plot, scripts/plot_run.py)
#
# The CUDA toolkit (nvcc, cuBLASLt, NCCL) is expected to be installed already (it is not a
# Debian-main package); the script checks for it: without it `make` builds a CPU-only trainer,
# and --test, whose suites build the CUDA kernel set, stops.
set -euo pipefail

packages=(g++ make libopenblas-dev libcli11-dev nlohmann-json3-dev libpcre2-dev libxxhash-dev libopenmpi-dev openmpi-bin bible-kjv)
if [[ "${1:-}" == "--test" ]]; then
    # clang-14 and its runtimes (libFuzzer, ASan, UBSan): scripts/fuzz.sh
    packages+=(libgtest-dev python3-torch python3-numpy python3-pip python3-matplotlib clang-14 libclang-rt-14-dev
               clang-format)
elif [[ "${1:-}" == "--study" ]]; then
    packages+=(python3-matplotlib)
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

# tiktoken is not packaged in Debian: pip, into the system python the tests call (/usr/bin/python3).
if [[ "${1:-}" == "--test" ]] && ! /usr/bin/python3 -c 'import tiktoken' 2>/dev/null; then
    echo "setup: installing tiktoken (pip)"
    pip_cmd=(/usr/bin/python3 -m pip install --break-system-packages --quiet tiktoken)
    if [[ $(id -u) -ne 0 ]]; then pip_cmd=(sudo "${pip_cmd[@]}"); fi
    "${pip_cmd[@]}"
fi

# transformers (and its safetensors) for the checkpoint tests: GPT2LMHeadModel must load a
# checkpoint unchanged. 4.36.2 supports Debian's torch 1.13 and leaves its numpy and torch alone.
if [[ "${1:-}" == "--test" ]] && ! /usr/bin/python3 -c 'import transformers, safetensors' 2>/dev/null; then
    echo "setup: installing transformers (pip)"
    pip_cmd=(/usr/bin/python3 -m pip install --break-system-packages --quiet 'transformers==4.36.2')
    if [[ $(id -u) -ne 0 ]]; then pip_cmd=(sudo "${pip_cmd[@]}"); fi
    "${pip_cmd[@]}"
fi

if ! command -v nvcc >/dev/null && [[ ! -x "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" ]]; then
    if [[ "${1:-}" == "--test" ]]; then   # the test suites build and check the CUDA kernel set
        echo "setup: nvcc not found (PATH or \$CUDA_HOME/bin): the tests need the CUDA toolkit" >&2
        exit 1
    fi
    echo "setup: notice: nvcc not found (PATH or \$CUDA_HOME/bin): make builds a CPU-only trainer"
fi

# cudnn-frontend's C++ headers (PyPI's nvidia-cudnn-frontend wheel, a zip: only its include/),
# for --attention cudnn where the CUDA toolkit has cuDNN (cudnn.h): into third_party/, which the
# Makefile looks in. Best effort: without them the trainer builds without that attention.
CUDNN_FRONTEND_VERSION=1.32.0
root=$(cd "$(dirname "$0")/.." && pwd)
frontend="$root/third_party/cudnn_frontend"
if [[ -f "${CUDA_HOME:-/usr/local/cuda}/include/cudnn.h" && ! -f "$frontend/include/cudnn_frontend.h" ]]; then
    echo "setup: fetching cudnn-frontend $CUDNN_FRONTEND_VERSION's headers (PyPI) into third_party/"
    tmp=$(mktemp -d)
    if /usr/bin/python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$tmp" \
            "nvidia-cudnn-frontend==$CUDNN_FRONTEND_VERSION" >/dev/null 2>&1 &&
        /usr/bin/python3 - "$tmp" "$frontend" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        if name.startswith("include/"):
            z.extract(name, sys.argv[2])
PY
    then
        echo "setup: cudnn-frontend headers in $frontend/include"
    else
        rm -rf "$frontend"
        echo "setup: notice: could not fetch cudnn-frontend's headers: the trainer builds without --attention cudnn"
    fi
    rm -rf "$tmp"
fi
