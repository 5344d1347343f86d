#!/bin/bash
# nsreq.sh PERF: ns per request by group (samples at 20 kHz over 4 s, requests/s from the wrk file)
rps=$(awk '/Requests\/sec/ {print $2}' $1.wrk)
perf report -i "$1" --sort sym --stdio -F overhead,sample,sym 2>/dev/null | grep -v '^#' | grep '%' | awk -v rps=$rps '
{ n=$2; sym=$0; sub(/^ *[0-9.]+% +[0-9]+ +\[[.k]\] /,"",sym);
  g="go-rest";
  if ($3=="[k]") g="kernel";
  else if (sym ~ /percore\/runtime\/httpd\./ || sym ~ /^main\./) g="server-code";
  else if (sym ~ /frame\/http1\./) g="http1";
  else if (sym ~ /indexbyte|memmove|memeq|aeshash|IndexByte|memclr/) g="bytehelpers";
  else if (sym ~ /percore\/percore/) g="percore-rest";
  tot[g]+=n; all+=n }
END { req=rps*4; for (g in tot) printf "%-14s %7.0f ns/req\n", g, tot[g]/20000/req*1e9; printf "%-14s %7.0f ns/req (rps %d)\n", "all", all/20000/req*1e9, rps }' | sort
