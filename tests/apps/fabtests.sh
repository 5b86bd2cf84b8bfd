#!/usr/bin/env bash
# libfabric's own functional tests (fabtests 1.17.0, from ../shared/conformance) over uwarp:
# built against Debian's libfabric-dev, then run with fabtests' runfabtests.sh through uwarp-run
# for libfabric's verbs provider with ofi_rxm (RDM endpoints) and alone (MSG endpoints).
#
# libfabric's verbs provider takes a loopback source address for a request to pick the device's
# address with any port (verbs_info.c, vrb_fill_addr), so a server asked to listen on 127.0.0.1
# listens elsewhere than its client connects. The tests therefore run inside a network namespace
# of their own whose one link (a veth pair) has the address 10.235.0.1, which both sides use.
#
# Every test runfabtests.sh runs must pass or report that the provider lacks what it needs
# ("Notrun", each named), except those tests/apps/fabtests_expected.txt leaves out (with -e),
# each with its reason: tests of the other provider's endpoint type, and the known failures.
#   fabtests.sh PATH/TO/uwarp-run
# Exit status: 0 passed, 1 failed, 77 skipped (saying why).
set -uo pipefail
run=$(readlink -f "$1")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
suite=${UWARP_FABTESTS_SRC:-$root/../shared/conformance/fabtests-1.17.0}
expected=$here/fabtests_expected.txt
limit=${UWARP_FABTESTS_TIMEOUT:-30}  # seconds per test (runfabtests.sh -T)

skip() {
  echo "SKIP: $*"
  exit 77
}
[ -d "$suite" ] || skip "fabtests' source is not at $suite"
[ -f /usr/include/rdma/fabric.h ] || skip "libfabric-dev is not installed (scripts/setup installs it)"
command -v autoreconf >/dev/null && command -v libtoolize >/dev/null ||
  skip "autoconf, automake and libtool are not installed (scripts/setup installs them)"
[ "$(id -u)" -eq 0 ] || skip "the tests need a network namespace of their own (root)"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"

work=$(mktemp -d /tmp/uwarp-fabtests.XXXXXX)
ns="uwarp_fab$$"
cleanup() {
  ip netns del "$ns" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

# Only the programs of runfabtests.sh's functional set are built (not the unit tests and
# benchmarks), into $work/bin.
echo "fabtests: building $(basename "$suite")'s functional tests against Debian's libfabric"
cp -r "$suite" "$work/src"
programs=$(sed -n '/^functional_tests=(/,/^)/p' "$work/src/scripts/runfabtests.sh" |
           grep -o '"fi_[a-z_]*' | tr -d '"' | sort -u)
if ! (cd "$work/src" && ./autogen.sh && ./configure -q --with-libfabric=/usr &&
      make -s -j "$(nproc)" $(printf 'functional/%s ' $programs) && mkdir "$work/bin" &&
      cp $(printf 'functional/%s ' $programs) "$work/bin/") >"$work/build.log" 2>&1; then
  echo "FAIL: fabtests did not build:"
  tail -n 30 "$work/build.log"
  exit 1
fi

addr=10.235.0.1
ip netns add "$ns" || skip "cannot create a network namespace here"
ip -n "$ns" link add fab0 type veth peer name fab1 &&
  ip -n "$ns" link set lo up && ip -n "$ns" link set fab0 up && ip -n "$ns" link set fab1 up &&
  ip -n "$ns" addr add "$addr/24" dev fab0 || { echo "FAIL: network namespace setup"; exit 1; }

failed=0
for prov in "verbs;ofi_rxm" "verbs"; do
  # What this provider's run leaves out (fabtests_expected.txt), as runfabtests.sh's -e patterns
  # (regular expressions over its test names, comma-separated).
  excludes=$(awk -F' [|] ' -v p="$prov" '!/^#/ && NF >= 4 && $1 == p { printf "%s%s", sep, $2; sep = "," }' "$expected")
  log="$work/$prov.log"
  ip netns exec "$ns" "$run" bash "$work/src/scripts/runfabtests.sh" -p "$work/bin" \
    -t functional -T "$limit" -s "$addr" -c "$addr" ${excludes:+-e "$excludes"} -v "$prov" >"$log" 2>&1
  # -v writes a YAML record per test: "- name: TEST -p PROV", then "  result: RESULT".
  results=$(awk '/^- name:/ { sub(/^- name: */, ""); sub(/ -p ".*$/, ""); name = $0 }
                 /^  result:/ { print $2 "|" name }' "$log")
  count() { grep -c "^$1|" <<<"$results"; }
  echo "fabtests $prov: $(count Pass) passed, $(count Fail) failed," \
       "$(count Notrun) not run (the provider lacks what they need), $(count Excluded) left out" \
       "(by runfabtests.sh's own lists, and by the patterns below)"
  grep '^Notrun|' <<<"$results" | sed 's/^Notrun|/  not run: /'
  awk -F' [|] ' -v p="$prov" '!/^#/ && NF >= 4 && $1 == p { printf "  left out (%s): /%s/: %s\n", $3, $2, $4 }' "$expected"
  if [ "$(count Pass)" -eq 0 ] || [ "$(count Fail)" -ne 0 ]; then
    failed=1
    grep '^Fail|' <<<"$results" | sed 's/^Fail|/  FAIL: /'
    echo "--- runfabtests.sh's record of each failed test:"
    awk '/^- name:/ { if (fail) printf "%s", block; block = ""; fail = 0 }
         { block = block $0 "\n" }
         /^  result: Fail/ { fail = 1 }
         END { if (fail) printf "%s", block }' "$log" | head -n 200
  fi
done
exit $failed
