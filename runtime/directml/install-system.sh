#!/usr/bin/env bash
# The system half of `make directml` (Debian 12 and 13, x86-64): Wine (64-bit), an X server for it
# (Xvfb, xauth), vulkan-tools (vulkaninfo names the Vulkan device), the mingw-w64 cross compiler for
# the host programs, and Mesa >= 25's lavapipe. Debian 12's own Mesa 22.3 lacks
# VK_EXT_descriptor_indexing and gives silently wrong DirectML results, so on Debian 12 Mesa comes
# from bookworm-backports (the source is added when missing). Does nothing when all is present;
# installs as root (CI), or through sudo when that is there.
set -euo pipefail

fail() { echo "install-system.sh: $*" >&2; exit 2; }

[ "$(uname -s)" = Linux ] || fail "DirectML under Wine needs Linux (on Windows DirectML runs natively; no system setup)"
[ "$(uname -m)" = x86_64 ] || fail "DirectML.dll is x86-64 only; this machine is $(uname -m)"
[ -r /etc/os-release ] || fail "no /etc/os-release: install wine, wine64, xvfb, xauth, vulkan-tools, gcc-mingw-w64-x86-64 and Mesa >= 25 by hand"
. /etc/os-release
[ "${ID:-}" = debian ] || [ "${ID_LIKE:-}" = debian ] || fail "only Debian 12 and 13 are scripted (this is ${PRETTY_NAME:-unknown}); install wine, wine64, xvfb, xauth, vulkan-tools, gcc-mingw-w64-x86-64 and Mesa >= 25 by hand"
codename=${VERSION_CODENAME:-}

packages=(wine wine64 xvfb xauth vulkan-tools gcc-mingw-w64-x86-64 mesa-vulkan-drivers)

installed_version() { dpkg-query -W -f='${db:Status-Abbrev} ${Version}\n' "$1" 2>/dev/null | awk '$1=="ii"{print $2}'; }

mesa_ok() {
    local v; v=$(installed_version mesa-vulkan-drivers)
    [ -n "$v" ] && dpkg --compare-versions "$v" ge 25
}

missing=()
for p in "${packages[@]}"; do
    [ -n "$(installed_version "$p")" ] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && mesa_ok; then
    echo "install-system.sh: wine, xvfb, xauth, vulkan-tools, mingw-w64 and Mesa $(installed_version mesa-vulkan-drivers) already installed"
    exit 0
fi

sudo=()
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || fail "needs root to install ${missing[*]:-Mesa >= 25}: run it as root"
    sudo=(sudo)
fi
apt_get() { "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get "$@"; }

mesa_release=()
case "$codename" in
    bookworm)
        list=/etc/apt/sources.list.d/bookworm-backports.list
        if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
            echo "deb http://deb.debian.org/debian bookworm-backports main" | "${sudo[@]}" tee "$list" >/dev/null
        fi
        mesa_release=(-t bookworm-backports) ;;
    trixie|forky|sid|"") ;;
    *) fail "Debian $codename is not scripted: install Mesa >= 25's mesa-vulkan-drivers and the rest by hand" ;;
esac

apt_get update -q
apt_get install -y -q --no-install-recommends wine wine64 xvfb xauth vulkan-tools gcc-mingw-w64-x86-64
apt_get install -y -q --no-install-recommends "${mesa_release[@]}" mesa-vulkan-drivers
mesa_ok || fail "mesa-vulkan-drivers is $(installed_version mesa-vulkan-drivers); DirectML needs >= 25 (older lavapipe gives silently wrong results)"
echo "install-system.sh: installed; Mesa $(installed_version mesa-vulkan-drivers)"
