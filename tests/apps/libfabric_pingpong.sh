#!/usr/bin/env bash
# libfabric over uwarp: Debian's unmodified fi_pingpong (libfabric-bin 1.17) through uwarp-run,
# with libfabric's verbs provider on a MSG endpoint and with verbs;ofi_rxm on an RDM endpoint,
# over 127.0.0.1. It runs every size fi_pingpong knows (0 B to 6 MiB, `-S all`) with
# its data check (`-c`: every byte of every message compared with the pattern); both processes
# must exit 0 and the client must report every size. Each run is bounded by a timeout.
#   libfabric_pingpong.sh PATH/TO/uwarp-run
# Exit status: 0 passed, 1 failed, 77 skipped (fi_pingpong not installed: Debian's libfabric-bin).
set -uo pipefail
run=$1
# shellcheck source=../support/ports.sh
. "$(dirname "$0")/../support/ports.sh"

if ! command -v fi_pingpong >/dev/null; then
  echo "SKIP: fi_pingpong is not installed (Debian package libfabric-bin; scripts/setup installs it)"
  exit 77
fi
tmp=$(mktemp -d /tmp/uwarp-libfabric.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
failed=0
# The sizes of `fi_pingpong -S all`: its size table, 0 B to 6 MiB.
sizes_expected=46

# pingpong NAME PROVIDER ENDPOINT ARGS...: one server and one client; 0 if both passed.
pingpong() {
  local name=$1 prov=$2 ep=$3 port srv rc_s rc_c
  shift 3
  port=$(free_port) || { echo "FAIL: $name: no free port"; return 1; }
  timeout 120 "$run" fi_pingpong -p "$prov" -e "$ep" -B "$port" "$@" >"$tmp/$name.server" 2>&1 &
  srv=$!
  if ! wait_listen "$port"; then
    echo "FAIL: $name: the server does not listen on its control port $port"
    kill "$srv" 2>/dev/null
    wait "$srv"
    return 1
  fi
  timeout 120 "$run" fi_pingpong -p "$prov" -e "$ep" -P "$port" "$@" 127.0.0.1 >"$tmp/$name.client" 2>&1
  rc_c=$?
  # The server ends on its own after its client (given 20 s); one whose client failed may wait
  # for ever, so it gets 1 s and is then stopped.
  end_server "$srv" "$([ $rc_c -eq 0 ] && echo 20 || echo 1)"
  rc_s=$?
  if [ $rc_c -ne 0 ] || [ $rc_s -ne 0 ]; then
    echo "FAIL: $name: client exit $rc_c, server exit $rc_s"
    echo "--- client:"; tail -n 20 "$tmp/$name.client"
    echo "--- server:"; tail -n 20 "$tmp/$name.server"
    return 1
  fi
  return 0
}

# rows FILE: the client's result rows ("bytes #sent #ack ...", one per size).
rows() {
  grep -cE '^[0-9.]+[kmg]? +[0-9.]+k? +=[0-9.]+k? ' "$1"
}

for cfg in "msg verbs msg" "rdm verbs;ofi_rxm rdm"; do
  read -r name prov ep <<<"$cfg"
  # Every size, data checked.
  if pingpong "$name-all" "$prov" "$ep" -S all -c -I 20; then
    n=$(rows "$tmp/$name-all.client")
    if [ "$n" -ne "$sizes_expected" ]; then
      echo "FAIL: $name: the client reported $n sizes, expected $sizes_expected"
      cat "$tmp/$name-all.client"
      failed=1
    else
      echo "ok: fi_pingpong -p '$prov' -e $ep -S all -c: $n sizes, 0 B to 6 MiB, data checked"
    fi
  else
    failed=1
  fi
  # A longer run of two sizes, for the figures (not asserted: timing is a benchmark's job).
  # (An RDM endpoint connects at its first message, inside the timed loop: enough iterations
  # make that a small part of the figure.)
  for size in 64 1048576; do
    iters=$([ "$size" = 64 ] && echo 5000 || echo 500)
    if pingpong "$name-$size" "$prov" "$ep" -S "$size" -I "$iters"; then
      echo "ok: fi_pingpong -p '$prov' -e $ep -S $size -I $iters: $(grep -E '^[0-9.]+[kmg]? ' "$tmp/$name-$size.client" | awk '{print $7 " us per transfer, " $6 " MB/s"}')"
    else
      failed=1
    fi
  done
done
exit $failed
