#!/usr/bin/env bash
# run_default.sh — on a fresh machine: install, build, prepare the bundled corpus (first run
# only), and train the default model. Extra arguments go to ./train_gpt.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
make -j"$(nproc)" all
scripts/prepare_kjv.sh
exec ./train_gpt "$@"
