#!/usr/bin/env bash
# run_default.sh — on a fresh machine: install, build, prepare the bundled corpus (first run
# only), and train the default model, with a checkpoint at its end (every 120 steps: the
# default run has 120), so that its summary's next: commands can sample from it or train on.
# Extra arguments go to ./train_gpt (-n 0: no checkpoint).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
make -j"$(nproc)" all
scripts/prepare_kjv.sh
exec ./train_gpt --checkpoint-every 120 "$@"
