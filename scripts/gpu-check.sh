#!/usr/bin/env bash
# The GPU figures, in one command of under 5 minutes, for a session lent a GPU machine.
#
# Here (a machine without the GPU), once per build:
#     bash scripts/gpu-check.sh --prepare
# builds the release binary, strips it into .gpu/ (git-ignored through .git/info/exclude),
# copies the CUDA probe from ../shared/gpu/ beside it and downloads the Vulkan loader's
# packages into .gl/ (docs of the device tool: "bring the loaders").
#
# There (the device tool's `run`, carrying .gpu and .gl):
#     bash scripts/gpu-check.sh
# unpacks the loader, then runs each figure with its own time limit and prints one table.
# Every figure is measured side by side in one process or one script; nothing is estimated.
# Copy the table into docs/EVALUATION.md with the device name it prints.
#
# GPU_CHECK_QUICK=1 shrinks every size, for trying the script out on lavapipe (its figures
# mean nothing).
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--prepare" ]; then
    set -e
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo /.gpu/ >>.git/info/exclude
    grep -qx '/.gl/' .git/info/exclude 2>/dev/null || echo /.gl/ >>.git/info/exclude
    cargo build --release -p tessera-cli
    mkdir -p .gpu .gl /tmp/amd64/partial
    strip -o .gpu/tessera target/release/tessera
    if [ -f ../shared/gpu/paged_limit.cu ]; then cp ../shared/gpu/paged_limit.cu .gpu/; fi
    o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
    # shellcheck disable=SC2086
    apt-get $o update -qq
    # shellcheck disable=SC2086
    (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
    du -sh .gpu .gl
    echo "prepared: carry .gpu and .gl, run: bash scripts/gpu-check.sh"
    exit 0
fi

T=.gpu/tessera
if [ ! -x "$T" ]; then
    echo "error: $T missing: run 'bash scripts/gpu-check.sh --prepare' first and carry .gpu" >&2
    exit 2
fi
if ! ldconfig -p | grep -q libvulkan; then
    for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
    ldconfig
fi
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
    export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
OUTDIR="${OUT:-/tmp/gpu-check}"
mkdir -p "$OUTDIR"
LOG="$OUTDIR/gpu-check.log"
: >"$LOG"

# Runs a step under a time limit, its output kept in the log; prints nothing itself.
step() {
    local limit=$1 name=$2
    shift 2
    echo "=== $name: $*" >>"$LOG"
    timeout "$limit" "$@" >"$OUTDIR/$name.txt" 2>&1
    local rc=$?
    cat "$OUTDIR/$name.txt" >>"$LOG"
    echo "rc=$rc" >>"$LOG"
    return $rc
}
# The value of `key=` on a step's output, or "-".
val() { grep -o "$2=[0-9.e+-]*" "$OUTDIR/$1.txt" 2>/dev/null | tail -1 | cut -d= -f2 || true; }
# A number from a report.json, or "-".
json() {
    python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" \
        "$1" "$2" 2>/dev/null || echo -
}

# Sizes: the real-GPU figures, or tiny ones for a try-out.
if [ "${GPU_CHECK_QUICK:-}" = 1 ]; then
    BIG=256 MID=256 FRAMES=2
else
    BIG=4096 MID=1024 FRAMES=10
fi

START=$(date +%s)
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null || echo unknown)"
$T devices 2>&1 | head -5

step 60 overhead-relaunch $T bench overhead --backend wgpu --size $BIG --frames 5 --rounds 3 --procedure relaunch
step 60 overhead-two-pass $T bench overhead --backend wgpu --size $BIG --frames 5 --rounds 3 --procedure two-pass
# The same relaunch run with wgpu's shader bounds checks off (docs/WGPU.md, "Bounds checks").
step 60 overhead-unchecked env TESSERA_WGPU_BOUNDS_CHECKS=off $T bench overhead --backend wgpu \
    --size $BIG --frames 5 --rounds 3 --procedure relaunch
# And with pipelines not specialized to their bindings (docs/WGPU.md, "Specialized per
# pipeline"), to follow what the constants are worth.
step 60 overhead-generic env TESSERA_WGPU_SPECIALIZE=off $T bench overhead --backend wgpu \
    --size $BIG --frames 5 --rounds 3 --procedure relaunch
for n in 1 2; do
    step 60 "boiling-$n" $T run boiling --backend wgpu --devices "$n" --size $BIG --page 64 \
        --frames $FRAMES --warmup 2 --gif-every 0 --model concurrent --force --out "$OUTDIR/boiling-$n"
done
# Two devices again, each waiting for its launches pass by pass (deferred execution off), to
# follow what queuing across the devices of one GPU is worth (docs/PROTOCOL.md).
step 60 boiling-2-waiting $T run boiling --backend wgpu --devices 2 --size $BIG --page 64 \
    --frames $FRAMES --warmup 2 --gif-every 0 --model concurrent --deferred off --force \
    --out "$OUTDIR/boiling-2-waiting"
step 60 page-moves $T bench page-moves --backend wgpu --pages-kib 64 --rounds 3
# Staging off and on: on copies the next band's pages during the current band's launch
# (docs/PROTOCOL.md, "Copies during the launch"), never yet timed on a GPU. Three rounds, as
# elsewhere: the bench's median of two is the slower round, which may hold a pipeline's first
# compile (on lavapipe a resident frame read 4408 ms with one round, 53 ms with three).
step 120 oversub $T bench oversubscription --backend wgpu --size $MID --page 64 --frames 3 \
    --rounds 3 --ratios 1.5,2,4 --policy lru --staging off,on --out "$OUTDIR/oversub" --force
# Every workload on the GPU and on the CPU backend of the same machine, side by side (the ray
# tracer under a 1 MiB budget, the game trace, boiling, the stencil, vr).
if [ -n "${GPU_CHECK_QUICK:-}" ]; then
    step 120 bench-gpu $T bench gpu --quick --frames 2
else
    step 150 bench-gpu $T bench gpu --frames 4
fi
if command -v nvcc >/dev/null && [ -f .gpu/paged_limit.cu ]; then
    nvcc -O3 -arch=sm_90 -o /tmp/pl .gpu/paged_limit.cu >>"$LOG" 2>&1 &&
        step 60 probe /tmp/pl 4096 64
fi
# Owned pages' scaling goal (docs/EVALUATION.md, "Owned pages") is a CPU-backend figure whose
# 8 devices, timed one at a time on a shared 2-core machine, never came within its noise of
# 7.0: the same bench on this machine's cores, last, so the GPU figures come first.
if [ -n "${GPU_CHECK_QUICK:-}" ]; then
    step 90 scaling-cpu $T bench scaling --size 256 --page 64 --topology nvlink --devices 1,2 \
        --frames 2 --rounds 1 --against-write-home off
else
    step 90 scaling-cpu $T bench scaling --size 1024 --page 64 --topology nvlink \
        --devices 1,2,4,8 --frames 5 --rounds 3 --against-write-home off
fi

b1="$OUTDIR/boiling-1/report.json"
b2="$OUTDIR/boiling-2/report.json"
echo
echo "| figure | measured |"
echo "| --- | --- |"
echo "| bench overhead ${BIG}², relaunch (paged/unpaged) | $(val overhead-relaunch overhead_ratio) |"
echo "| bench overhead ${BIG}², two-pass | $(val overhead-two-pass overhead_ratio) |"
ms() { grep -o "^$2 *[0-9.]* ms" "$OUTDIR/$1.txt" 2>/dev/null | grep -o '[0-9.]* ms' | head -1 || true; }
echo "| ${BIG}² paged two-pass, held parts in place / merged always | $(ms overhead-two-pass 'paged two-pass') / $(ms overhead-two-pass 'paged two-pass, merge always') |"
echo "| ${BIG}² unpaged / paged relaunch, bounds checks on | $(ms overhead-relaunch unpaged) / $(ms overhead-relaunch 'paged relaunch') |"
echo "| ${BIG}² unpaged / paged relaunch, bounds checks off | $(ms overhead-unchecked unpaged) / $(ms overhead-unchecked 'paged relaunch') |"
echo "| ${BIG}² unpaged / paged relaunch, generic pipelines | $(ms overhead-generic unpaged) / $(ms overhead-generic 'paged relaunch') |"
fps1=$(json "$b1" 'round(r["frames_per_second_measured"],2)')
fps2=$(json "$b2" 'round(r["frames_per_second_measured"],2)')
ratio=$(python3 -c "print(round($fps2 / $fps1, 3))" 2>/dev/null || echo -)
echo "| boiling ${BIG}², fps 1 device / 2 devices (2 ÷ 1; goal at least 0.8) | $fps1 / $fps2 ($ratio) |"
host_row() {
    python3 - "$1" <<'PY' 2>/dev/null || echo -
import json, sys
d = json.load(open(sys.argv[1]))["per_device"][0]
h = d["host"]
print(", ".join(str(x) for x in [h["manager_messages_per_frame"], d["page_requests_per_frame"],
      h["submissions_per_frame"], h["blocking_waits_per_frame"], h["device_waits_per_frame"],
      round(h["bytes_read_back_per_frame"])]))
PY
}
echo "| boiling ${BIG}² 1 device, per frame: manager messages, requests, submissions, blocking waits, GPU waits, bytes read back | $(host_row "$b1") |"
echo "| boiling ${BIG}² 2 devices, device 0 per frame: the same | $(host_row "$b2") |"
b2w="$OUTDIR/boiling-2-waiting/report.json"
echo "| boiling ${BIG}², fps 2 devices with deferred execution off | $(json "$b2w" 'round(r["frames_per_second_measured"],2)') |"
echo "| the same, device 0 per frame | $(host_row "$b2w") |"
echo "| page moves 64 KiB (ratios) | $(grep -o '[a-z0-9_]*ratio=[0-9.]*\|h2d_vs_[a-z_]*=[0-9.]*\|d2d_vs_[a-z_0-9]*=[0-9.]*' "$OUTDIR/page-moves.txt" 2>/dev/null | tr '\n' ' ') |"
# Per ratio: frame time over its transfer bound (goal: at most 1.5), then ms/frame, the bound
# and the waits for the GPU a frame.
vs_bound() {
    awk '$2 == "lru" && $1 ~ /^[0-9.]+$/ { printf "%s× staging %s: %s (%s / %s ms, %s GPU waits/frame); ", $1, $4, $14, $5, $13, $20 }' \
        "$OUTDIR/oversub.txt" 2>/dev/null
    grep -o 'host link: [0-9.]* GB/s' "$OUTDIR/oversub.txt" 2>/dev/null
    grep '^error' "$OUTDIR/oversub.txt" 2>/dev/null | head -1
}
echo "| oversubscription ${MID}², frame ÷ transfer bound per ratio (ms/frame / bound) | $(vs_bound | tr '\n' ' ') |"
echo "| bench gpu: CPU ms/frame ÷ GPU ms/frame per workload | $(grep -o 'gpu_vs_cpu_[a-z]*=[0-9.]*' "$OUTDIR/bench-gpu.txt" 2>/dev/null | tr '\n' ' ') |"
# The kernels' device time over the GPU frame: far below 1, the frame is the host's.
echo "| bench gpu: GPU busy ÷ GPU frame per workload | $(grep -o 'gpu_busy_share_[a-z]*=[0-9.]*' "$OUTDIR/bench-gpu.txt" 2>/dev/null | tr '\n' ' ') |"
echo "| CPU backend, bench scaling: modeled speed-up per device count (goal 1.9 / 3.7 / 7.0 at 2 / 4 / 8) | $(grep -o 'speedup_[0-9]*=[0-9.]*\|speedup_steady_[0-9]*=[0-9.]*' "$OUTDIR/scaling-cpu.txt" 2>/dev/null | tr '\n' ' ') |"
echo "| probe | $(tail -6 "$OUTDIR/probe.txt" 2>/dev/null | tr '\n' ';' | cut -c1-400) |"
echo
echo "seconds: $(($(date +%s) - START)); every step's output: $LOG"
