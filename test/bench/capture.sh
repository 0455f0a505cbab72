# shellcheck shell=bash
# Sourced by the bench scripts: a capture of both legs of a proxy on loopback, for
# tokentap-transit (test/bench/transit.hpp).
#
#   capture_start FILE UPSTREAM_PORT PROXY_PORT [CMD-PREFIX...]
#     starts tcpdump (Debian's `tcpdump`) writing FILE: the segments with a payload sent from the
#     upstream's port or the proxy's listener, nanosecond timestamps; returns once it listens.
#     CMD-PREFIX (e.g. taskset -c 0) runs it.  Sets CAPTURE_PID.
#   capture_stop
#     stops it, waits for it (not in a subshell: tcpdump is this shell's child) and sets
#     CAPTURE_DROPPED to how many segments the kernel dropped (a match needs both legs).

capture_start() {
  local file=$1 up=$2 proxy=$3
  shift 3
  CAPTURE_ERR=$file.err
  : > "$CAPTURE_ERR"
  "$@" tcpdump -i lo -n -s 0 -B 131072 --time-stamp-precision=nano -w "$file" \
    "tcp and (src port $up or src port $proxy) and (((ip[2:2] - ((ip[0]&0xf)<<2)) - ((tcp[12]&0xf0)>>2)) != 0)" \
    2> "$CAPTURE_ERR" &
  CAPTURE_PID=$!
  until grep -q listening "$CAPTURE_ERR" 2> /dev/null; do
    kill -0 "$CAPTURE_PID" 2> /dev/null || { cat "$CAPTURE_ERR" >&2; return 1; }
    sleep 0.1
  done
}

capture_stop() {
  kill -INT "$CAPTURE_PID" 2> /dev/null || true
  wait "$CAPTURE_PID" 2> /dev/null || true
  CAPTURE_DROPPED=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$CAPTURE_ERR")
  CAPTURE_DROPPED=${CAPTURE_DROPPED:-?}
  rm -f "$CAPTURE_ERR"
}
