#!/usr/bin/env bash
# Installs the real game data the documented `tessera scene`, `tessera run quake` and
# docs/eval commands read: OpenArena's maps and textures from Debian (free Quake 3 content,
# about 350 MiB). The tests never need it: they write their own small maps.
#   bash scripts/openarena.sh      # then the data is in /usr/share/games/openarena/baseoa
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
# Both packages: the maps alone (openarena-081-maps) leave every texture a checker placeholder.
if dpkg -s openarena-data openarena-081-maps >/dev/null 2>&1; then
    echo "OpenArena's maps and textures are already installed in /usr/share/games/openarena/baseoa"
    exit 0
fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    openarena-081-maps openarena-data
ls /usr/share/games/openarena/baseoa/*.pk3
