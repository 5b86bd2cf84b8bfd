#!/usr/bin/env bash
# CI check of uwarp's drop-in libibverbs.so.1 (and librdmacm.so.1) against Debian's binaries,
# which are linked BIND_NOW: every libibverbs symbol they import must be exported, at the same
# version node, or the program does not even start. Checks the imports of the rdma-core and
# perftest programs below, of librdmacm.so.1 itself, and of the providers perftest loads directly
# (libmlx5.so.1, libefa.so.1); the soname; the version nodes and their chain (as rdma-core 44);
# and that nothing is exported outside those nodes (the C++ core stays local).
# With uwarp's librdmacm.so.1 as second argument, the same for it: every librdmacm import of the
# programs, every default-version export of Debian's librdmacm.so.1, the RDMACM_1.0 ... 1.3
# nodes and chain, and every libibverbs symbol (IBVERBS_*, UWARP_PRIVATE_1) it imports itself.
# Usage: check_symbols.sh PATH/TO/libibverbs.so.1 [PATH/TO/librdmacm.so.1]
# Exit 0 on success, 1 on a failure, 77 (skipped) if none of the Debian binaries is installed.
set -uo pipefail
lib=$1
rdmacm=${2:-}
programs=(ibv_devices ibv_devinfo rping ucmatose rdma_server rdma_client rdma_xserver rdma_xclient
          cmtime udaddy mckey rstream riostream ib_write_bw ib_write_lat ib_read_bw ib_read_lat
          ib_send_bw ib_send_lat)
libraries=(librdmacm.so.1 libmlx5.so.1 libefa.so.1)

if ! command -v readelf >/dev/null; then
  echo "SKIP: readelf not installed (binutils)"
  exit 77
fi

targets=()
for p in "${programs[@]}"; do
  path=$(command -v "$p" 2>/dev/null) && targets+=("$path") || echo "note: $p not installed"
done
for l in "${libraries[@]}"; do
  path=$(/sbin/ldconfig -p 2>/dev/null | awk -v n="$l" '$1 == n && /x86-64|64bit|,/ { print $NF; exit }')
  [ -n "$path" ] && targets+=("$path") || echo "note: $l not installed"
done
if [ ${#targets[@]} -eq 0 ]; then
  echo "SKIP: none of the Debian binaries is installed (ibverbs-utils, rdmacm-utils, perftest)"
  exit 77
fi

failed=0
fail() {
  echo "FAIL: $*"
  failed=1
}

soname=$(readelf -d "$lib" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
[ "$soname" = "libibverbs.so.1" ] || fail "soname is '$soname', not libibverbs.so.1"

# Defined dynamic symbols as name@VERSION (default and hidden versions alike).
exported=$(readelf --dyn-syms -W "$lib" | awk '$7 != "UND" && $8 ~ /@/ { sub(/@@/, "@", $8); print $8 }' | sort -u)
unversioned=$(readelf --dyn-syms -W "$lib" | awk 'NR > 3 && $7 != "UND" && $7 != "ABS" && $5 != "LOCAL" && $8 != "" && $8 !~ /@/ { print $8 }')
[ -z "$unversioned" ] || fail "exported without a version node: $(echo $unversioned)"
stray=$(grep -Ev '@(IBVERBS_(1\.(0|1|5|6|7|8|9|10|11|12|13|14)|PRIVATE_34)|UWARP_PRIVATE_1)$' <<<"$exported" || true)
[ -z "$stray" ] || fail "exported outside the expected version nodes: $(echo $stray)"

# Version nodes and parents, as rdma-core 44.
declare -A want_parent=([IBVERBS_1.0]="" [IBVERBS_1.1]=IBVERBS_1.0 [IBVERBS_1.5]=IBVERBS_1.1
  [IBVERBS_1.6]=IBVERBS_1.5 [IBVERBS_1.7]=IBVERBS_1.6 [IBVERBS_1.8]=IBVERBS_1.7
  [IBVERBS_1.9]=IBVERBS_1.8 [IBVERBS_1.10]=IBVERBS_1.9 [IBVERBS_1.11]=IBVERBS_1.10
  [IBVERBS_1.12]=IBVERBS_1.11 [IBVERBS_1.13]=IBVERBS_1.12 [IBVERBS_1.14]=IBVERBS_1.13
  [IBVERBS_PRIVATE_34]="")
declare -A got_parent=()
while read -r node parent; do
  got_parent[$node]=$parent
done < <(readelf -V -W "$lib" | awk '
  /Version definition/ { in_def = 1; next }
  /Version needs/ { in_def = 0 }
  in_def && /Name:/ { if (name != "") print name, parent; name = $NF; parent = ""; if ($0 ~ /BASE/) name = ""; next }
  in_def && /Parent 1:/ { parent = $NF }
  END { if (name != "") print name, parent }')
for node in "${!want_parent[@]}"; do
  if [ -z "${got_parent[$node]+set}" ]; then
    fail "version node $node missing"
  elif [ "${got_parent[$node]}" != "${want_parent[$node]}" ]; then
    fail "version node $node has parent '${got_parent[$node]}', expected '${want_parent[$node]}'"
  fi
done

# Debian's own libibverbs.so.1, if installed: every name it exports at a default version is
# exported here too, at the same version (also what no tested binary imports yet).
real=$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "libibverbs.so.1" { print $NF; exit }')
if [ -n "$real" ] && [ "$(readlink -f "$real")" != "$(readlink -f "$lib")" ]; then
  missing=()
  for sym in $(readelf --dyn-syms -W "$real" | awk '$7 != "UND" && $8 ~ /@@/ { sub(/@@/, "@", $8); print $8 }'); do
    grep -qxF -- "$sym" <<<"$exported" || missing+=("$sym")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    fail "not exported although rdma-core's $real exports them: ${missing[*]}"
  else
    echo "ok: every default-version export of $real"
  fi
fi

total=0
for t in "${targets[@]}"; do
  imports=$(readelf --dyn-syms -W "$t" | awk '$7 == "UND" && $8 ~ /@IBVERBS_/ { print $8 }' | sort -u)
  n=0
  missing=()
  for sym in $imports; do
    n=$((n + 1))
    grep -qxF -- "$sym" <<<"$exported" || missing+=("$sym")
  done
  total=$((total + n))
  if [ ${#missing[@]} -gt 0 ]; then
    fail "$t imports ${#missing[@]} symbol(s) not exported: ${missing[*]}"
  else
    echo "ok: $t ($n libibverbs imports)"
  fi
done

# --- librdmacm.so.1 ------------------------------------------------------------------------------
if [ -n "$rdmacm" ]; then
  soname=$(readelf -d "$rdmacm" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')
  [ "$soname" = "librdmacm.so.1" ] || fail "librdmacm soname is '$soname', not librdmacm.so.1"
  cm_exported=$(readelf --dyn-syms -W "$rdmacm" | awk '$7 != "UND" && $8 ~ /@/ { sub(/@@/, "@", $8); print $8 }' | sort -u)
  cm_unversioned=$(readelf --dyn-syms -W "$rdmacm" | awk 'NR > 3 && $7 != "UND" && $7 != "ABS" && $5 != "LOCAL" && $8 != "" && $8 !~ /@/ { print $8 }')
  [ -z "$cm_unversioned" ] || fail "librdmacm exports without a version node: $(echo $cm_unversioned)"
  cm_stray=$(grep -Ev '@RDMACM_1\.[0-3]$' <<<"$cm_exported" || true)
  [ -z "$cm_stray" ] || fail "librdmacm exports outside RDMACM_1.0 ... 1.3: $(echo $cm_stray)"
  declare -A cm_want=([RDMACM_1.0]="" [RDMACM_1.1]=RDMACM_1.0 [RDMACM_1.2]=RDMACM_1.1 [RDMACM_1.3]=RDMACM_1.2)
  declare -A cm_got=()
  while read -r node parent; do
    cm_got[$node]=$parent
  done < <(readelf -V -W "$rdmacm" | awk '
    /Version definition/ { in_def = 1; next }
    /Version needs/ { in_def = 0 }
    in_def && /Name:/ { if (name != "") print name, parent; name = $NF; parent = ""; if ($0 ~ /BASE/) name = ""; next }
    in_def && /Parent 1:/ { parent = $NF }
    END { if (name != "") print name, parent }')
  for node in "${!cm_want[@]}"; do
    if [ -z "${cm_got[$node]+set}" ]; then
      fail "librdmacm version node $node missing"
    elif [ "${cm_got[$node]}" != "${cm_want[$node]}" ]; then
      fail "librdmacm version node $node has parent '${cm_got[$node]}', expected '${cm_want[$node]}'"
    fi
  done
  real_cm=$(/sbin/ldconfig -p 2>/dev/null | awk '$1 == "librdmacm.so.1" { print $NF; exit }')
  if [ -n "$real_cm" ] && [ "$(readlink -f "$real_cm")" != "$(readlink -f "$rdmacm")" ]; then
    missing=()
    for sym in $(readelf --dyn-syms -W "$real_cm" | awk '$7 != "UND" && $8 ~ /@@/ { sub(/@@/, "@", $8); print $8 }'); do
      grep -qxF -- "$sym" <<<"$cm_exported" || missing+=("$sym")
    done
    if [ ${#missing[@]} -gt 0 ]; then
      fail "librdmacm: not exported although $real_cm exports them: ${missing[*]}"
    else
      echo "ok: every default-version export of $real_cm"
    fi
  fi
  cm_total=0
  for t in "${targets[@]}"; do
    imports=$(readelf --dyn-syms -W "$t" | awk '$7 == "UND" && $8 ~ /@RDMACM_/ { print $8 }' | sort -u)
    [ -n "$imports" ] || continue
    n=0
    missing=()
    for sym in $imports; do
      n=$((n + 1))
      grep -qxF -- "$sym" <<<"$cm_exported" || missing+=("$sym")
    done
    cm_total=$((cm_total + n))
    if [ ${#missing[@]} -gt 0 ]; then
      fail "$t imports ${#missing[@]} librdmacm symbol(s) not exported: ${missing[*]}"
    else
      echo "ok: $t ($n librdmacm imports)"
    fi
  done
  # What uwarp's librdmacm.so.1 needs from uwarp's libibverbs.so.1 (bound at start-up too).
  missing=()
  n=0
  for sym in $(readelf --dyn-syms -W "$rdmacm" | awk '$7 == "UND" && $8 ~ /@(IBVERBS_|UWARP_PRIVATE_1)/ { print $8 }' | sed 's/ (.*//' | sort -u); do
    n=$((n + 1))
    grep -qxF -- "$sym" <<<"$exported" || missing+=("$sym")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    fail "$rdmacm imports ${#missing[@]} libibverbs symbol(s) not exported: ${missing[*]}"
  else
    echo "ok: $rdmacm ($n libibverbs imports)"
  fi
  echo "check_symbols: librdmacm: $cm_total imports of the programs exported at their versions"
fi

if [ $failed -eq 0 ]; then
  echo "check_symbols: ${#targets[@]} binaries, $total imports, all exported at their versions"
fi
exit $failed
