#!/usr/bin/env bash
# Installs what the partition harness needs besides iproute2 (Debian's nftables
# and faketime) when it is missing and this runs as root. Prints what it did;
# exits 1 when an install failed.
set -euo pipefail
missing=()
command -v nft >/dev/null 2>&1 || missing+=(nftables)
[[ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]] || missing+=(faketime)
if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi
if [[ "$(id -u)" != "0" ]]; then
    echo "lab-tools: ${missing[*]} missing and not root: cannot install" >&2
    exit 1
fi
mkdir -p .tools
echo "lab-tools: installing ${missing[*]} (Debian)"
if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } \
    >.tools/lab-tools-install.log 2>&1; then
    cat .tools/lab-tools-install.log >&2
    exit 1
fi
