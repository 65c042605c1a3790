#!/usr/bin/env bash
# Regenerates this snapshot: today's case library with the embedded default model on every CPU engine, over Chat
# Completions (MODEL@ENGINE/) and the two other API surfaces (MODEL@ENGINE-surfaces/API/), then the page (matrix/).
# About two hours on 2 cores (each run.json says when its run started and finished). Needs the engines installed
# (toolmatrix install ENGINE) and toolmatrix's pytest on PATH. --dry-run prints the commands and runs nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."  # the checkout: the engine specs name their chat templates from there
dry=""
case "$*" in
  "") ;;
  "--dry-run") dry=1 ;;
  *) echo "usage: $0 [--dry-run]" >&2; exit 2 ;;  # a typo must not start hours of runs
esac
run() { echo "$*"; [ -n "$dry" ] || "$@"; }

model=qwen2.5-coder-0.5b
out=results/cpu-qwen2.5-coder
for engine in llamacpp llama-cpp-python transformers vllm; do
  evidence=()
  [ "$engine" = llamacpp ] && evidence=(--evidence=all)  # the model's own words on passes too: the replay harvests them
  run pytest -p no:cacheprovider -n 2 --engine=$engine --model=$model --results-dir $out/$model@$engine --no-matrix \
    "${evidence[@]}"
  run pytest -p no:cacheprovider -n 2 --engine=$engine --model=$model --api responses,messages \
    --results-dir $out/$model@$engine-surfaces --no-matrix
done
run toolmatrix matrix build $out -o $out/matrix
