#!/usr/bin/env bash
# ensure-tools.sh: installs, with apt-get, the tools `make test` uses that this machine lacks:
# for lint, shellcheck; for the tune-nic.sh tests, ethtool and ip; for the benchmark smoke run
# and tune-nic.sh, taskset and flock; for examples/kv's tests and scripts/bench-resp.sh,
# redis-cli, redis-benchmark (redis-tools) and redis-server; for scripts/bench-resp.sh's proxy
# table, nutcracker (twemproxy); for the curl tests of examples/http, examples/http_proxy and
# examples/file_server, curl; for examples/http_proxy's tests against a real upstream, nginx
# (nginx-light: on a system with an init, Debian's package also starts the nginx service, which
# the tests do not use: they run their own nginx in the foreground in a temporary directory;
# `apt-get remove nginx-light` undoes it); for runtime/httpd's conformance tests (and
# scripts/bench-http.sh), wrk, and h2load --h1 for pipelining (nghttp2-client); for the TLS
# interop tests of examples/http (and scripts/bench-tls.sh), openssl.
# scripts/bench-http.sh also needs h2o, which it names when it is missing. Without root or apt-get, or when apt-get fails (no network, say),
# it only names what is missing and exits 0, and the step that needs a missing tool says so: lint
# fails on a missing shellcheck, the benchmark smoke run fails without taskset, the tune-nic.sh
# apply and restore tests fail without flock, and the namespace test that needs ethtool and ip,
# the tests that need redis, nutcracker or nginx and the curl tests skip with a reason.
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
command -v redis-cli >/dev/null || add redis-tools
command -v redis-benchmark >/dev/null || add redis-tools
command -v redis-server >/dev/null || add redis-server
command -v curl >/dev/null || add curl
command -v nutcracker >/dev/null || add nutcracker
command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || add nginx-light
command -v wrk >/dev/null || add wrk
command -v h2load >/dev/null || add nghttp2-client
command -v openssl >/dev/null || add openssl
if ((${#need[@]} == 0)); then exit 0; fi

if ((EUID != 0)) || ! command -v apt-get >/dev/null; then
	echo "ensure-tools.sh: missing ${need[*]}; install them (Debian: apt-get install -y ${need[*]})" >&2
	exit 0
fi
echo "ensure-tools.sh: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update -qq && apt-get install -y -qq "${need[@]}" >/dev/null; }; then
	echo "ensure-tools.sh: could not install ${need[*]} (apt-get failed; see above); install them by hand" >&2
	exit 0
fi
