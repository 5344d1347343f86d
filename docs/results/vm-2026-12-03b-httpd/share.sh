#!/bin/bash
# share.sh PERFDATA: percent of samples by package group, and the top httpd symbols
perf report -i "$1" --sort sym --stdio 2>/dev/null | grep -v '^#' | grep '%' | awk '
{ pct=$1; sub("%","",pct); sym=$0; sub(/^ *[0-9.]+% +\[[.k]\] /,"",sym);
  g="other";
  if ($2=="[k]") g="kernel";
  else if (sym ~ /percore\/runtime\/httpd\./) g="httpd";
  else if (sym ~ /frame\/http1\./) g="http1";
  else if (sym ~ /indexbyte|memmove|memeq|aeshash|IndexByte|memclr/) g="bytehelpers";
  else if (sym ~ /percore\/percore/) g="percore-rest";
  else g="go-rest";
  tot[g]+=pct; if (g=="httpd") hs[sym]+=pct }
END { for (g in tot) printf "%-14s %6.2f\n", g, tot[g];
      printf "httpd/http1    %6.3f\n", tot["httpd"]/tot["http1"];
      for (s in hs) printf "  %6.2f %s\n", hs[s], s | "sort -rn | head -20" }'
