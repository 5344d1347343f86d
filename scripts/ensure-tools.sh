#!/usr/bin/env bash
# ensure-tools.sh: installs, with apt-get, the tools `make test` uses that this machine lacks:
# for lint, shellcheck; for the tune-nic.sh tests, ethtool and ip; for the benchmark smoke run
# and tune-nic.sh, taskset and flock. Without root or apt-get it only names what is missing; lint then
# fails on a missing shellcheck, and the tests that need the others skip with a reason.
set -euo pipefail

need=()
add() {
	local pkg=$1 p
	for p in "${need[@]}"; do [[ $p == "$pkg" ]] && return 0; done
	need+=("$pkg")
}
command -v shellcheck >/dev/null || add shellcheck
command -v ethtool >/dev/null || add ethtool
command -v ip >/dev/null || add iproute2
command -v taskset >/dev/null || add util-linux
command -v flock >/dev/null || add util-linux
if ((${#need[@]} == 0)); then exit 0; fi

if ((EUID != 0)) || ! command -v apt-get >/dev/null; then
	echo "ensure-tools.sh: missing ${need[*]}; install them (Debian: apt-get install -y ${need[*]})" >&2
	exit 0
fi
echo "ensure-tools.sh: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq "${need[@]}" >/dev/null
