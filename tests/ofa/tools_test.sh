#!/usr/bin/env bash
# Runs Debian's ibv_devices and ibv_devinfo (-l, default, -v) over uwarp's drop-in
# libibverbs.so.1 through uwarp-run and checks what they print: one device, uwarp0, iWARP,
# port ACTIVE, link layer Ethernet, and the limits uwarp reports.
# Usage: tools_test.sh PATH/TO/uwarp-run LIBRARY_DIR. Exit 77 (skipped) without ibverbs-utils.
set -uo pipefail
run=$1
libdir=$2
if ! command -v ibv_devinfo >/dev/null || ! command -v ibv_devices >/dev/null; then
  echo "SKIP: ibv_devices/ibv_devinfo not installed (Debian package ibverbs-utils)"
  exit 77
fi
failed=0
# tool PROGRAM ARGS...: runs a Debian program over uwarp. In sanitizer builds the sanitizer
# runtime (UWARP_OFA_PRELOAD, set by CMake) is preloaded into that program only.
tool() {
  if [ -n "${UWARP_OFA_PRELOAD:-}" ]; then
    "$run" env LD_PRELOAD="$UWARP_OFA_PRELOAD" "$@"
  else
    "$run" "$@"
  fi
}
# expect NAME OUTPUT REGEX...: every extended regex must match a line of OUTPUT.
expect() {
  local name=$1 out=$2
  shift 2
  for re in "$@"; do
    if ! grep -Eq -- "$re" <<<"$out"; then
      echo "FAIL: $name: no line matches: $re"
      failed=1
    fi
  done
}

# The drop-in library is the one loaded.
loaded=$("$run" sh -c 'LD_TRACE_LOADED_OBJECTS=1 ibv_devinfo' 2>&1)
expect "loader" "$loaded" "libibverbs\.so\.1 => $libdir/libibverbs\.so\.1"

out=$(tool ibv_devices 2>&1) || { echo "FAIL: ibv_devices exit status $?"; failed=1; }
echo "$out"
expect "ibv_devices" "$out" "^[[:space:]]+uwarp0[[:space:]]+[0-9a-f]{16}$"
[ "$(grep -c uwarp <<<"$out")" -eq 1 ] || { echo "FAIL: ibv_devices: not exactly one device"; failed=1; }

out=$(tool ibv_devinfo -l 2>&1) || { echo "FAIL: ibv_devinfo -l exit status $?"; failed=1; }
expect "ibv_devinfo -l" "$out" "^1 HCA found:" "^[[:space:]]+uwarp0$"

out=$(tool ibv_devinfo 2>&1) || { echo "FAIL: ibv_devinfo exit status $?"; failed=1; }
expect "ibv_devinfo" "$out" \
  "^hca_id:[[:space:]]+uwarp0$" \
  "transport:[[:space:]]+iWARP \(1\)" \
  "vendor_id:[[:space:]]+0x757770" \
  "board_id:[[:space:]]+uwarp" \
  "phys_port_cnt:[[:space:]]+1$" \
  "state:[[:space:]]+PORT_ACTIVE \(4\)" \
  "link_layer:[[:space:]]+Ethernet"

out=$(tool ibv_devinfo -v 2>&1) || { echo "FAIL: ibv_devinfo -v exit status $?"; failed=1; }
echo "$out"
expect "ibv_devinfo -v" "$out" \
  "transport:[[:space:]]+iWARP \(1\)" \
  "max_qp_rd_atom:[[:space:]]+128$" \
  "max_qp_init_rd_atom:[[:space:]]+128$" \
  "atomic_cap:[[:space:]]+ATOMIC_GLOB \(2\)" \
  "max_pkeys:[[:space:]]+1$" \
  "state:[[:space:]]+PORT_ACTIVE \(4\)" \
  "link_layer:[[:space:]]+Ethernet" \
  "max_msg_sz:[[:space:]]+0x80000000$" \
  "pkey_tbl_len:[[:space:]]+1$" \
  "gid_tbl_len:[[:space:]]+1$" \
  "GID\[  0\]:[[:space:]]+fe80:0000:0000:0000:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}:[0-9a-f]{4}"
if grep -q "Failed" <<<"$out"; then
  echo "FAIL: ibv_devinfo -v reported a failure"
  failed=1
fi

out=$(tool ibv_devinfo -d uwarp0 -i 2 2>&1) && { echo "FAIL: ibv_devinfo -i 2 succeeded"; failed=1; }
expect "ibv_devinfo -i 2" "$out" "Invalid port requested"

[ $failed -eq 0 ] && echo "ofa tools: OK"
exit $failed
