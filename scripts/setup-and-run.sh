#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build, then run fp8moe-info and the example host
# (one DeepSeek-V3-shaped MoE layer; the CPU backend when no GPU is present).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
echo
echo "== fp8moe-info =="
./build/tools/fp8moe-info --library ./build/src/libfp8moe.so.1
echo
echo "== example host: one DeepSeek-V3-shaped layer (backend: auto) =="
./build/examples/fp8moe_example_deepseek --backend auto ./build/src/libfp8moe.so.1
