#!/usr/bin/env bash
# Re-creates the figures and tables of docs/EVALUATION.md that come from the paper's evaluation
# (boiling: Figures 8-11 and 13, Tables 2-3, device counts, scaling, page moves), the game
# trace's and OO-VR's, from real runs. Each command is the one the document quotes, with
# `--force` added and, where it says so, the paper's settings ($P below). It leaves out the
# sections that quote their own commands beside their figures: the stencil and convolution
# sweeps (docs/eval/stencil-z, docs/eval/convolution), the filtered game trace
# (docs/eval/quake-oa_dm1-filter), the ray tracer's picture and Figure 13's home-placement
# replays. About 10 minutes of runs on an idle 2-core machine by the times the document quotes
# for the parts, the two 500-frame game traces near half of it, plus the release build; 27
# minutes under a load average of 2 to 10. Per-point report.json folders, SVGs and GIFs are
# dropped afterwards to keep the repository small; run a command by hand to keep them.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release -q -p tessera-cli
tessera() { "${CARGO_TARGET_DIR:-target}/release/tessera" "$@"; }
E=docs/eval

uptime
# The paper's figures use its procedures as they stand: `--footprint-ahead off` (the relaunch
# procedure launches, faults, requests and relaunches; the default asks for a footprint
# kernel's pages first, docs/EVALUATION.md "Measured and modeled"), and its write-home rule
# (`--coherence write-home`: a modified page read by another device also goes home; the
# default, owned pages, keeps it on its owner, docs/PROTOCOL.md "Owned pages"), and its
# two-pass, which merges every part through the temporary (`--held-in-place off`; the default
# runs a part whose pages the device holds in place, docs/PROTOCOL.md "Procedures"), and its
# even partitioning (`--split-on-pages off`; the default cuts on page boundaries, which would
# hide the page-size steps of Figure 10, docs/PROTOCOL.md "Bands on page boundaries").
P="--footprint-ahead off --coherence write-home --held-in-place off --split-on-pages off"
# Figure 8 (memory) at 1024x1024, and the sweep whose wall time the issue asks for.
time tessera sweep page-size --workload boiling --size 1024 --devices 2 --pages 1,2,...,512 --topology pcie3-x16 --force --out $E/page-size-1024 $P
# Figures 9-11 and the stage shares at 512x512, as in the paper, on its 2007 bus.
tessera sweep page-size --workload boiling --size 512 --devices 2 --pages 1,2,...,512 --frames 20 --topology pcie1-x16 --force --out $E/page-size-512 $P
tessera sweep page-size --workload boiling --size 512 --devices 2 --pages 1,2,...,512 --frames 20 --procedure two-pass --topology pcie1-x16 --force --out $E/page-size-512-two-pass $P
# Page boundaries that do not line up with the partition boundary (row 320).
tessera sweep page-size --workload boiling --size 640 --devices 2 --pages 8,...,512 --frames 20 --topology pcie1-x16 --force --out $E/page-size-640 $P
# Device counts, with direct links and through host.
tessera sweep devices --workload boiling --size 1024 --page 64 --devices 1,2,4,8 --frames 5 --topology nvlink --force --out $E/devices-1024-nvlink
tessera sweep devices --workload boiling --size 1024 --page 64 --devices 1,2,4,8 --frames 5 --topology pcie3-x16 --force --out $E/devices-1024-pcie3
# Modeled speed-up against the ideal (isolated-device model), and page moves against memcpy.
tessera bench scaling --size 1024 --page 64 --topology nvlink --devices 1,2,4,8 --frames 5 --rounds 5 | tee $E/bench-scaling.txt
tessera bench page-moves --rounds 5 | tee $E/bench-page-moves.txt
# Table 2 and Table 3: 512x512, 64x64 pages.
for procedure in two-pass relaunch; do
    for devices in 1 2; do
        tessera run boiling --size 512 --page 64 --devices $devices --frames 20 --warmup 1 \
            --procedure $procedure --topology pcie1-x16 --force --out $E/table2-$procedure-$devices $P
    done
done
tessera bench overhead --size 512 --page 64 --frames 20 --rounds 5 | tee $E/table2-unpaged.txt
# Figure 13's idea: where pages live.
tessera run boiling --size 512 --page 32 --devices 4 --split tiles --frames 5 --residency-png --topology pcie1-x16 --force --out $E/residency-512-tiles $P
tessera run boiling --size 640 --page 128 --devices 2 --frames 5 --residency-png --topology pcie1-x16 --force --out $E/residency-640 $P
uptime

rm -rf $E/*/page-* $E/*/devices-* $E/*/*.svg $E/*/frames.gif $E/table2-*/frame.png $E/residency-*/frame.png \
    $E/residency-*/report.json $E/residency-*/stages.png

# The game trace (paper 4.1.2) on the procedural scene: Fig 12, the page-size sweep, Fig 13.
T=$(mktemp -d)
tessera run quake --frames 500 --devices 2 --split left-right --page 32 --width 1024 --height 768 --force --out $E/quake-fig12 --trace $T/fig12.trace --png-every 0
rm -f $E/quake-fig12/frame-*.png
tessera trace replay $T/fig12.trace --clear-each-frame --force --out $E/quake-fig12-clear
tessera trace replay $T/fig12.trace --pages 4,8,16,32,64,128,256 --force --out $E/quake-sweep
tessera trace replay $T/fig12.trace --pages 4,8,16,32,64,128,256 --clear-each-frame --force --out $E/quake-sweep-clear
tessera run quake --frames 12 --path-frames 500 --devices 2 --split left-right --page 8 --width 1024 --height 768 --initial-placement random --drop-unused --residency-png --force --out $E/quake-fig13 --png-every 0
rm -f $E/quake-fig13/frame-*.png
tessera run quake --frames 1 --path-frames 500 --width 512 --height 384 --page 32 --png-every 0 --force --out $E/quake-frame
rm -f $E/quake-frame/report.json $E/quake-frame/requests.*
# The real map (needs OpenArena's data: bash scripts/openarena.sh).
if ls /usr/share/games/openarena/baseoa/*.pk3 >/dev/null 2>&1; then
    tessera run quake --map oa_dm1 --frames 500 --devices 2 --split left-right --page 32 --width 640 --height 480 --force --out $E/quake-oa_dm1 --trace $T/oa_dm1.trace --png-every 250
    tessera trace replay $T/oa_dm1.trace
    tessera trace replay $T/oa_dm1.trace --clear-each-frame --force --out $E/quake-oa_dm1-clear
    tessera trace replay $T/oa_dm1.trace --pages 4,8,16,32,64,128,256 --clear-each-frame --force --out $E/quake-oa_dm1-sweep-clear
    tessera trace replay $T/oa_dm1.trace --pages 4,8,16,32,64,128,256 --force --out $E/quake-oa_dm1-sweep
    tessera run quake --map oa_dm1 --frames 12 --path-frames 500 --devices 2 --split left-right --page 8 --width 640 --height 480 --initial-placement random --drop-unused --residency-png --force --out $E/quake-oa_dm1-fig13 --png-every 0
    # OO-VR's Figures 15-18 (about 5 minutes).
    tessera sweep vr --map oa_dm1 --frames 4 --warmup 1 --width 320 --height 240 --rounds 3 --force --out $T/vr
    mkdir -p $E/vr-oa_dm1
    cp $T/vr/fig1[5-8].csv $T/vr/fig1[5-8].png $E/vr-oa_dm1/
    cp $T/vr/oo-vr-4/stereo.png $E/vr-oa_dm1/oo-vr-4-stereo.png
else
    echo "OpenArena's data is not installed (bash scripts/openarena.sh): skipping the oa_dm1 figures" >&2
fi
rm -rf $T $E/quake-*/*.svg
