#!/usr/bin/env bash
# The device call after plan_sixteenth.sh: where each shape's time goes, part by part, next to each
# part's floor (`deepinfer bench --profile`: eager, synchronised per part; the floors from
# v4::decode_part_floors / prefill_part_floors with the copy, FP8 and bf16 rates measured in the
# same run), and the floor test. Run on the GPU machine from the repository root after
# `tar xJf .device-bin.tar.xz` (binaries from tools/device/pack_bins.sh, cuda_floor_test among them):
#   run(carry=[".device-bin.tar.xz"], timeout_s=590,
#       command="tar xJf .device-bin.tar.xz && GIT_REV=<rev> tools/device/plan_profiles.sh")
set -uo pipefail
cd "$(dirname "$0")/../.."
export TESTS="cuda_floor_test" TESTS_S=${TESTS_S:-60}
export BENCH_S=${BENCH_S:-480}
F4="--synthetic v4-flash:4"
export BENCH_CONFIGS="p8kprof $F4 --batch 1 --prompt-len 8192 --gen-len 4 --profile
ep256prof --synthetic v4-flash-ep8 --batch 256 --prompt-len 512 --gen-len 3 --profile
ep64prof --synthetic v4-flash-ep8 --batch 64 --prompt-len 4096 --gen-len 3 --profile
b1prof $F4 --batch 1 --prompt-len 4096 --gen-len 8 --profile
b32prof $F4 --batch 32 --prompt-len 4096 --gen-len 8 --profile"
exec tools/device/run_session.sh
