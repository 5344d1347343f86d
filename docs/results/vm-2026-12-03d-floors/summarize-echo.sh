#!/usr/bin/env bash
# summarize-echo.sh FILE...: the echo runs of bench-1.sh (ab.sh's lines with
# CLIENT=c: side backend conns bytes rps us/req ctxsw syscalls server% client% steal%),
# with BENCHMARKING.md's rejections: a run whose steal is above 5%, or whose
# server + client CPU is below 150% of a core (a noisy-host episode: a fast echo
# keeps both CPUs busy), is left out. Per side and row: the median of the kept
# runs, all of them in order (rejected ones in brackets), and each side's ratio
# to d (the C liburing echo) over the repeats where both were kept.
awk '
  NF == 11 && $1 ~ /^[a-h]$/ {
    row = $3; k = $1 " " row; rep[k]++; r = rep[k]
    ok = ($11 + 0 <= 5 && $9 + $10 >= 150)
    all[k] = all[k] (ok ? sprintf(" %.2f", $6) : sprintf(" [%.2f]", $6))
    if (ok) { n[k]++; v[k, n[k]] = $6 + 0; kept[k, r] = $6 + 0 }
    sides[$1] = 1; rows[row] = 1; if (r > maxr) maxr = r
  }
  function median(k,   m, i, j, t, a) {
    m = n[k]; if (!m) return -1
    for (i = 1; i <= m; i++) a[i] = v[k, i]
    for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return (m % 2) ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  END {
    for (row in rows) for (s in sides) {
      k = s " " row; ratios = ""; pm = 0
      for (r = 1; r <= maxr; r++) if (((k, r) in kept) && (("d " row, r) in kept)) {
        ratios = ratios sprintf(" %.2f", kept[k, r] / kept["d " row, r]); pm++ }
      printf "%s %s: median %.2f us of %d kept;%s; / d per kept pair:%s\n", row, s, median(k), n[k], all[k], ratios
    }
  }' "$@" | sort
