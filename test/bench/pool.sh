#!/usr/bin/env bash
# The per-round differences and ratios of ab.sh runs, pooled over one or more runs (issue 8).
#
#   test/bench/pool.sh FIRST run1.log [run2.log ...]
#   FIRST: the mode the others are compared with (e.g. nginx, a:full)
#
# Reads the `round N MODE total …` lines ab.sh prints (its whole output saved with `| tee`, or
# just those lines).  A round is one run's round: a mode's value is compared with FIRST's in the
# same round of the same run only, so runs with different mode sets pool fine (a mode missing
# from a run just adds no rounds).  For every other mode, in the order first met: the per-round
# differences (µs per event) in all and per part — the I/O thread's user and system time, the
# other threads — and the per-round ratio of the totals, each with its mean and 95 % confidence
# interval.  ab.sh prints its own run's summary through this script; to pool runs of the same
# code under different build letters, rename one first (`sed 's/ b:full / a:full /'`).
set -euo pipefail
export LC_ALL=C
[ $# -ge 2 ] || { echo "usage: pool.sh FIRST run.log..." >&2; exit 2; }
first=$1
shift
# Per part as well: a change to what the I/O thread computes shows in its user time, whose rounds
# spread far less than the totals' (system time follows the machine's neighbours).  t quantiles
# (two-sided 95 %) for n - 1 degrees of freedom; past 30 rounds, 2.0.
awk -v first="$first" '
  BEGIN { split("12.71 4.30 3.18 2.78 2.57 2.45 2.36 2.31 2.26 2.23 2.20 2.18 2.16 2.14 2.13 " \
                "2.12 2.11 2.10 2.09 2.09 2.08 2.07 2.07 2.06 2.06 2.06 2.05 2.05 2.05 2.04", tq, " ") }
  FNR == 1 { ++run }
  $1 == "round" {
    k = run SUBSEP $2
    if (!(k in seen)) { seen[k] = 1; keys[++nk] = k }
    if ($3 != first && !($3 in known)) { known[$3] = 1; modes[++nm] = $3 }
    t[k, $3] = $5; u[k, $3] = $8; s[k, $3] = $10; o[k, $3] = $12
  }
  # One line: the mode against the first mode in every round both ran (their difference,
  # or with `as_ratio` their ratio: on the totals against nginx, the CPU target itself), then the
  # mean and its 95 % interval.
  function compare(name, v, mode, as_ratio,    fmt, i, k, d, sum, ss, n, line, mean, sd, h) {
    fmt = as_ratio ? "%.3f" : "%+.2f"
    for (i = 1; i <= nk; ++i) {
      k = keys[i]
      if (!((k, mode) in v) || !((k, first) in v)) continue
      d = as_ratio ? v[k, mode] / v[k, first] : v[k, mode] - v[k, first]
      line = line sprintf(" " fmt, d); sum += d; ss += d * d; ++n
    }
    if (n == 0) return
    mean = sum / n
    if (n < 2) { printf "  %-12s %-8s%s  (mean " fmt ")\n", mode, name, line, mean; return }
    sd = ss - n * mean * mean; sd = sd > 0 ? sqrt(sd / (n - 1)) : 0
    h = (n - 1 <= 30 ? tq[n - 1] : 2.0) * sd / sqrt(n)
    printf "  %-12s %-8s%s  (mean " fmt ", " fmt " … " fmt ")\n", mode, name, line, mean, mean - h, mean + h
  }
  END { if (nk == 0) { print "pool.sh: no round lines" > "/dev/stderr"; exit 2 }
        for (i = 1; i <= nm; ++i) {
          compare("total", t, modes[i]); compare("io user", u, modes[i])
          compare("io sys", s, modes[i]); compare("rest", o, modes[i])
          compare("ratio", t, modes[i], 1)
        } }' "$@"
