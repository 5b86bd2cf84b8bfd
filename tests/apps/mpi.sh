#!/usr/bin/env bash
# Open MPI over uwarp: Debian's Open MPI 4.1 (openmpi-bin) runs tests/apps/mpi/mpi_check.c
# (built here with mpicc) through uwarp-run, with Open MPI's libfabric path (pml cm, mtl ofi)
# over libfabric's verbs provider with ofi_rxm, on two "hosts": two network namespaces of their
# own joined by a veth pair, A (10.236.0.1) and B (10.236.0.2).
#   1. 4 ranks, 2 per host: mpirun runs in A and starts B's ranks through
#      tests/apps/mpi_netns_agent.sh (ip netns exec) where it would use ssh. mpi_check measures
#      a ping-pong between rank 0 (A) and rank 2 (B), 8 B to 4 MiB, every byte checked, and
#      checks MPI_Allreduce and MPI_Alltoall over the 4 ranks.
#   2. 2 ranks on one host (both in A, no agent), the same checks.
# Each run must exit 0 and mpi_check must report that it passed on the expected number of hosts;
# that the traffic went over uwarp is checked in Open MPI's own report (every rank selected pml
# cm and the ofi mtl with provider "verbs;ofi_rxm") and in uwarp's (uwarp-run --debug traces the
# rdma_cm connections: run 1 must show connections established between 10.236.0.1 and
# 10.236.0.2). Before that, uwarp's device must be usable in each namespace (fi_info).
#
# Each rank runs under tests/apps/mpi_rank.sh, which works around a known uwarp problem
# (README.md, "Using uwarp with libfabric and MPI"): "localhost" is made the host's own address
# (else libfabric's verbs provider advertises 127.0.0.1 over uwarp).
# The two-host run includes an MPI_Allreduce of 8 MiB (mpi_check --large): its messages go
# through ofi_rxm's rendezvous (RDMA Reads), while libfabric's registration cache registers one
# region over two it holds and deregisters those.
#
# Every mpirun is bounded by its own --timeout and by timeout(1); the namespaces and any process
# left in them are removed on exit.
#   mpi.sh PATH/TO/uwarp-run
# Exit status: 0 passed, 1 failed, 77 skipped (saying why).
set -uo pipefail
run=$(readlink -f "$1")
here=$(cd "$(dirname "$0")" && pwd)
agent=$here/mpi_netns_agent.sh
rank=$here/mpi_rank.sh
limit=${UWARP_MPI_TIMEOUT:-60}  # seconds per mpirun (its --timeout; timeout(1) adds 30)

skip() {
  echo "SKIP: $*"
  exit 77
}
command -v mpirun >/dev/null && command -v ompi_info >/dev/null ||
  skip "Open MPI is not installed (Debian package openmpi-bin; scripts/setup installs it)"
command -v mpicc >/dev/null || skip "mpicc is not installed (Debian package libopenmpi-dev; scripts/setup installs it)"
ompi_info | grep -q "MCA mtl: ofi" || skip "this Open MPI has no ofi mtl (libfabric)"
command -v fi_info >/dev/null || skip "fi_info is not installed (Debian package libfabric-bin; scripts/setup installs it)"
[ "$(id -u)" -eq 0 ] || skip "the two hosts are network namespaces (root)"
command -v ip >/dev/null || skip "iproute2 (ip) is not installed"
command -v unshare >/dev/null || skip "unshare (util-linux) is not installed"

work=$(mktemp -d /tmp/uwarp-mpi.XXXXXX)
nsa="uwarp_mpia$$"
nsb="uwarp_mpib$$"
addr_a=10.236.0.1
addr_b=10.236.0.2
cleanup() {
  local ns pids
  for ns in "$nsa" "$nsb"; do
    # What a killed mpirun left behind in the namespace (its daemon and ranks).
    pids=$(ip netns pids "$ns" 2>/dev/null)
    [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
    ip netns del "$ns" 2>/dev/null
  done
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

if ! mpicc -O2 -Wall -Wextra -Werror -o "$work/mpi_check" "$here/mpi/mpi_check.c" >"$work/build.log" 2>&1; then
  echo "FAIL: mpi_check did not build:"
  cat "$work/build.log"
  exit 1
fi

ip netns add "$nsa" || skip "cannot create a network namespace here"
ip netns add "$nsb" || { echo "FAIL: network namespace setup"; exit 1; }
ip link add "umpi$$a" netns "$nsa" type veth peer name "umpi$$b" netns "$nsb" &&
  ip -n "$nsa" link set lo up && ip -n "$nsb" link set lo up &&
  ip -n "$nsa" link set "umpi$$a" up && ip -n "$nsb" link set "umpi$$b" up &&
  ip -n "$nsa" addr add "$addr_a/24" dev "umpi$$a" && ip -n "$nsb" addr add "$addr_b/24" dev "umpi$$b" ||
  { echo "FAIL: network namespace setup"; exit 1; }
net=10.236.0.0/24
echo "mpi: hosts A = namespace $nsa ($addr_a), B = namespace $nsb ($addr_b)"

failed=0
# uwarp's device, as libfabric sees it in each namespace where a rank runs (mpi_rank.sh): an RDM
# endpoint of verbs;ofi_rxm whose source is the namespace's address.
for pair in "$nsa $addr_a" "$nsb $addr_b"; do
  read -r ns addr <<<"$pair"
  srcs=$(ip netns exec "$ns" timeout 30 "$run" "$rank" "$net" fi_info -p "verbs;ofi_rxm" -t FI_EP_RDM -v 2>&1 |
         sed -n 's/^ *src_addr: //p' | sort -u | tr '\n' ' ')
  if [[ " $srcs" == *" fi_sockaddr_in://$addr:0 "* ]]; then
    echo "ok: $ns: uwarp-run fi_info -p 'verbs;ofi_rxm': an RDM endpoint from $addr"
  else
    echo "FAIL: $ns: uwarp-run fi_info -p 'verbs;ofi_rxm' offers no RDM endpoint from $addr (sources: ${srcs:-none})"
    failed=1
  fi
done
[ $failed -eq 0 ] || exit 1

# The flags of every run (see README.md, "Using uwarp with libfabric and MPI"):
mpi_flags=(
  --allow-run-as-root          # the namespaces need root; Open MPI refuses root without this
  --timeout "$limit"           # Open MPI ends the job (and says so) after this many seconds
  --mca pml cm --mca mtl ofi   # MPI messages through libfabric's tagged interface (ofi mtl)
  --mca mtl_ofi_provider_include "verbs;ofi_rxm"  # Open MPI takes no other libfabric provider
  -x FI_PROVIDER="verbs;ofi_rxm"  # libfabric offers no other provider, in every rank (-x)
  # With pml cm no BTL carries MPI messages, but Open MPI still starts the BTLs it finds (for
  # one-sided windows): tcp listens on sockets, and vader's shared-memory files are named after
  # the host name, which the two namespaces share. self is the one it needs.
  --mca btl self
  # 4 ranks and their uwarp progress threads on a machine of 2 cores: a rank that finds nothing
  # to do gives its core up (Open MPI does so by itself only when it counts more ranks than cores).
  --mca mpi_yield_when_idle 1
  --mca pml_base_verbose 10 --mca mtl_ofi_verbose 1  # Open MPI reports pml and provider chosen
)
# Not needed here: --mca oob_tcp_if_include NETWORK (the network of Open MPI's own control
# connections; each namespace has one interface besides lo) and btl_tcp_if_include (no tcp BTL).
# Each rank: through uwarp-run (--debug: rdma_cm events on stderr) and mpi_rank.sh.
rank_cmd=("$run" --debug "$rank" "$net" "$work/mpi_check")

# check NAME LOG RC RANKS HOSTS: the checks of one run's output; 0 if all passed.
check() {
  local name=$1 log=$2 rc=$3 ranks=$4 hosts=$5 ok=1 n
  if [ "$rc" -ne 0 ]; then
    echo "FAIL: $name: mpirun exit $rc"
    ok=0
  fi
  if ! grep -q "^mpi_check: passed$" "$log"; then
    echo "FAIL: $name: mpi_check did not pass"
    ok=0
  fi
  if ! grep -q "^mpi_check: $ranks ranks on $hosts hosts\?$" "$log"; then
    echo "FAIL: $name: expected $ranks ranks on $hosts host(s): $(grep '^mpi_check: [0-9]* ranks' "$log")"
    ok=0
  fi
  n=$(grep -c "select: component cm selected" "$log")
  if [ "$n" -ne "$ranks" ]; then
    echo "FAIL: $name: $n of $ranks ranks report pml cm selected"
    ok=0
  fi
  n=$(grep -c "mtl:ofi:prov: verbs;ofi_rxm$" "$log")
  if [ "$n" -ne "$ranks" ] || grep "mtl:ofi:prov: " "$log" | grep -qv "verbs;ofi_rxm$"; then
    echo "FAIL: $name: $n of $ranks ranks report the ofi mtl with provider verbs;ofi_rxm, or another provider was reported"
    ok=0
  fi
  if [ $ok -eq 0 ]; then
    echo "--- $name: the end of mpirun's output:"
    tail -n 40 "$log"
  fi
  [ $ok -eq 1 ]
}

# figures LOG: mpi_check's figures, indented.
figures() {
  grep -E "^(ping-pong|MPI_)" "$1" | sed 's/^/  /'
}

# 1. Two hosts, 4 ranks. UWARP_MPI_NETNS tells the agent which namespace each host is.
log=$work/two-hosts.log
start=$SECONDS
UWARP_MPI_NETNS="$addr_a=$nsa $addr_b=$nsb" ip netns exec "$nsa" \
  timeout -k 5 $((limit + 30)) mpirun "${mpi_flags[@]}" --mca plm_rsh_agent "$agent" \
  --host "$addr_a:2,$addr_b:2" -np 4 "${rank_cmd[@]}" --hosts 2 --large >"$log" 2>&1
rc=$?
if check "4 ranks on 2 hosts" "$log" $rc 4 2; then
  # Connections between the hosts, as uwarp traced them (each is seen by both of its ends).
  across=$(grep -E "core event ESTABLISHED ($addr_a:[0-9]+ -> $addr_b|$addr_b:[0-9]+ -> $addr_a):" "$log" | grep -c .)
  if [ "$across" -eq 0 ]; then
    echo "FAIL: 4 ranks on 2 hosts: uwarp traced no connection between $addr_a and $addr_b"
    failed=1
  else
    echo "ok: mpirun -np 4, 2 ranks on each host ($((SECONDS - start)) s): pml cm, ofi mtl, provider" \
         "verbs;ofi_rxm in every rank; $across uwarp connection ends established between the hosts"
    figures "$log"
  fi
else
  failed=1
fi

# 2. One host, 2 ranks (no agent: everything is local to mpirun).
log=$work/one-host.log
start=$SECONDS
ip netns exec "$nsa" timeout -k 5 $((limit + 30)) mpirun "${mpi_flags[@]}" \
  --host "$addr_a:2" -np 2 "${rank_cmd[@]}" --hosts 1 >"$log" 2>&1
rc=$?
if check "2 ranks on 1 host" "$log" $rc 2 1; then
  echo "ok: mpirun -np 2 on one host ($((SECONDS - start)) s): pml cm, ofi mtl, provider verbs;ofi_rxm in every rank"
  figures "$log"
else
  failed=1
fi
exit $failed
