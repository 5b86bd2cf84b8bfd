#!/usr/bin/env bash
# librpma's examples (librpma 1.2.0, from ../shared/conformance) over uwarp, unmodified: each
# example is built with CMake against Debian's librpma-dev, out of tree in a temporary folder,
# then its server and its client(s) run through uwarp-run over 127.0.0.1 as the examples'
# run-all-examples.sh runs them (the same arguments), each process under a timeout, on a free
# port. A case passes when every process exits 0 and prints, in order, the data the example
# moves: the private data exchanged, the string read or written (and, for the write examples,
# the client's line that comes only after its read-after-write or flush completed), the words
# of the remote log, the clients' names read by the server, every value of the ping-pongs.
#
# The examples' CMakeLists.txt include the rpma tree's cmake/functions.cmake from outside
# examples/; a stand-in with the functions they call is written into the temporary folder. Memory
# is DRAM: no <pmem-path> is given (and libpmem-dev is not needed), as run-all-examples.sh does
# without one.
#
# tests/apps/librpma_expected.txt lists the examples that are not run and those expected to fail,
# each with its reason and, for one that runs, a pattern its failing run must show. A listed case
# that passes is reported with a note; one that fails otherwise than listed fails the run.
#   librpma.sh PATH/TO/uwarp-run [CASE...]    (CASE: run only these, e.g. 07-atomic-write)
# Exit status: 0 passed, 1 failed, 77 skipped (saying why), 2 a wrong argument.
set -uo pipefail
[ $# -ge 1 ] || { echo "usage: librpma.sh PATH/TO/uwarp-run [CASE...]" >&2; exit 2; }
run=$(readlink -f "$1")
shift
only=("$@")
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
suite=${UWARP_RPMA_EXAMPLES_SRC:-$root/../shared/conformance/rpma-1.2.0-examples}
expected=$here/librpma_expected.txt
limit=30  # seconds for each process (a server that ends after an idle time gets more)
# shellcheck source-path=SCRIPTDIR source=../support/ports.sh
. "$here/../support/ports.sh"

skip() {
  echo "SKIP: $*"
  exit 77
}
[ -d "$suite" ] || skip "librpma's examples are not at $suite"
[ -f /usr/include/librpma.h ] || skip "librpma-dev is not installed (scripts/setup installs it)"
[ -f /usr/include/protobuf-c/protobuf-c.h ] ||
  skip "libprotobuf-c-dev is not installed (examples 09; scripts/setup installs it)"
command -v cmake >/dev/null || skip "cmake is not installed (scripts/setup installs it)"
command -v pkg-config >/dev/null || skip "pkg-config is not installed (pkgconf; scripts/setup installs it)"
command -v ss >/dev/null || skip "ss (iproute2) is not installed"

work=$(mktemp -d /tmp/uwarp-rpma.XXXXXX)
pids=()  # servers still running in the background
# shellcheck disable=SC2317  # called by the trap
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$work"
}
trap cleanup EXIT

# --- What is listed: "name | kind | pattern | why" (pattern "not run": not built nor run).
declare -A listed_kind listed_sign listed_why
trim() { sed 's/^ *//; s/ *$//' <<<"$1"; }
while IFS='|' read -r name kind sign why; do
  name=$(trim "$name")
  listed_kind[$name]=$(trim "$kind")
  listed_sign[$name]=$(trim "$sign")
  listed_why[$name]=$(trim "$why")
done < <(grep -v '^#' "$expected" | grep '|')

# --- The cases: an example, or an example run with one of its options (NAME:OPTION).
# The servers of 06 end only after 15 s without events: they come first, and are left to end in
# the background while the others run.
cases=(06-multiple-connections 06scch-multiple-connections 01-connection 02-read-to-volatile
       03-read-to-persistent 04-write-to-persistent 05-flush-to-persistent 07-atomic-write
       08-messages-ping-pong 08srq-simple-messages-ping-pong-with-srq
       08srq-simple-messages-ping-pong-with-srq:m 08srq-simple-messages-ping-pong-with-srq:r
       09-flush-to-persistent-GPSPM 09scch-flush-to-persistent-GPSPM 10-send-with-imm
       11-write-with-imm 12-receive-completion-queue 12scch-receive-completion-queue
       13-messages-ping-pong-with-srq)
failed=0  # problems of the list or of the suite's folders (the cases' failures are n_failed)
# is_case NAME: NAME is one of the cases.
is_case() {
  local c
  for c in "${cases[@]}"; do [ "$c" = "$1" ] && return 0; done
  return 1
}
# Every folder of the suite is a case or listed, and every listed name is one of them.
for d in "$suite"/*/; do
  ex=$(basename "$d")
  case $ex in cmake | common) continue ;; esac
  if ! is_case "$ex" && [ -z "${listed_kind[$ex]:-}" ]; then
    echo "FAIL: the example $ex is neither run nor listed in $(basename "$expected")"
    failed=$((failed + 1))
  fi
done
for name in "${!listed_kind[@]}"; do
  if is_case "$name"; then
    [ "${listed_sign[$name]}" != "not run" ] && continue
    echo "FAIL: $(basename "$expected") says $name is not run, but it is one of the cases here"
  elif [ -d "$suite/$name" ] && [ "${listed_sign[$name]}" = "not run" ]; then
    continue
  else
    echo "FAIL: $(basename "$expected") lists $name, which is neither a case here nor an example not run"
  fi
  failed=$((failed + 1))
done
if [ ${#only[@]} -gt 0 ]; then
  for name in "${only[@]}"; do
    is_case "$name" || { echo "unknown case: $name" >&2; exit 2; }
  done
  cases=("${only[@]}")
fi

# --- Build. The examples' CMakeLists.txt (one project per example) include
# ../../cmake/functions.cmake, the rpma tree's, beside examples/: $work/rpma has examples/ (a link
# to the suite) and the stand-in below.
mkdir -p "$work/rpma/cmake" "$work/build"
ln -s "$suite" "$work/rpma/examples"
cat >"$work/rpma/cmake/functions.cmake" <<'EOF'
# Stand-ins for the functions of the rpma tree's cmake/functions.cmake that librpma's examples
# call, written by uwarp's tests/apps/librpma.sh.

# check_if_librt_is_required(): LIBRT_LIBRARIES, the library clock_gettime needs: none since
# glibc 2.17.
function(check_if_librt_is_required)
	set(LIBRT_LIBRARIES "" PARENT_SCOPE)
endfunction()

# are_ibv_advise_flags_supported(VAR): whether to call ibv_advise_mr(IBV_ADVISE_MR_FLAG_FLUSH),
# which the examples do only for a file on PMem (with libpmem); they run on DRAM here.
function(are_ibv_advise_flags_supported var)
	set(${var} FALSE PARENT_SCOPE)
endfunction()

# prepend(VAR PREFIX ITEMS...): VAR = each item with PREFIX/ before it.
function(prepend var prefix)
	set(out)
	foreach(item ${ARGN})
		list(APPEND out "${prefix}/${item}")
	endforeach()
	set(${var} "${out}" PARENT_SCOPE)
endfunction()
EOF

examples=$(printf '%s\n' "${cases[@]%%:*}" | sort -u)
echo "librpma: building $(wc -w <<<"$examples") examples of $(basename "$suite") against Debian's librpma-dev"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)  # much faster than make here
build_one() {
  cmake "${generator[@]}" -S "$work/rpma/examples/$1" -B "$work/build/$1" >"$work/build/$1.log" 2>&1 &&
    cmake --build "$work/build/$1" -j 1 >>"$work/build/$1.log" 2>&1
}
start=$SECONDS
for ex in $examples; do
  build_one "$ex" &
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n; done
done
wait
echo "librpma: built in $((SECONDS - start)) s"
declare -A built
for ex in $examples; do
  if [ -x "$work/build/$ex/server" ] && [ -x "$work/build/$ex/client" ]; then
    built[$ex]=1
  else
    echo "FAIL: $ex did not build:"
    tail -n 20 "$work/build/$ex.log"
  fi
done

# --- Running.
# start_server CASE ARGS...: the case's server in the background ($server_pid), listening on
# $port; 1 if it does not listen.
start_server() {
  local c=$1
  shift
  timeout "$server_limit" "$run" "$work/build/${c%%:*}/server" 127.0.0.1 "$port" "$@" \
    >"$work/$c.server.out" 2>"$work/$c.server.err" &
  server_pid=$!
  pids+=("$server_pid")
  wait_listen "$port" "$server_pid" && return 0
  echo "the server does not listen on port $port" >>"$work/$c.problems"
  finish_server "$c" 1
  return 1
}

# client CASE TAG ARGS...: one client, in the foreground; its exit status goes to CASE.TAG.rc.
client() {
  local c=$1 tag=$2
  shift 2
  timeout "$limit" "$run" "$work/build/${c%%:*}/client" 127.0.0.1 "$port" "$@" \
    >"$work/$c.$tag.out" 2>"$work/$c.$tag.err"
  echo $? >"$work/$c.$tag.rc"
}

# finish_server CASE SECONDS: waits up to SECONDS for the server to end (stops it then); its exit
# status goes to CASE.server.rc.
finish_server() {
  local c=$1 rc
  end_server "$server_pid" "$2"
  rc=$?
  echo $rc >"$work/$c.server.rc"
  local p rest=()
  for p in "${pids[@]}"; do [ "$p" = "$server_pid" ] || rest+=("$p"); done
  pids=("${rest[@]}")
}

# expect FILE LINE...: FILE has these lines in this order (others may come between).
expect() {
  local file=$1 missing
  shift
  missing=$(printf '%s\n' "$@" |
            awk 'BEGIN { n = 0; i = 0 }
                 NR == FNR { want[n++] = $0; next }
                 i < n && $0 == want[i] { i++ }
                 END { if (i < n) print "missing: " want[i] }' - "$work/$file")
  [ -z "$missing" ] ||
    echo "$file lacks the line \"${missing#missing: }\" (or its lines come in another order)" >>"$work/$c.problems"
}

# pingpong FILE FORMAT FIRST EXCHANGES SIDE: the lines of a ping-pong of EXCHANGES rounds that
# starts at FIRST, as the client (SIDE=client: "sent N", "received N+1") or the server
# ("received N", "sent N+1") prints them; FORMAT has %s for "sent"/"received" and %d for N.
pingpong() {
  local file=$1 fmt=$2 v=$3 n=$4 side=$5 lines=() i
  # shellcheck disable=SC2059  # the format is the caller's
  for ((i = 0; i < n; i++)); do
    if [ "$side" = client ]; then
      lines+=("$(printf "$fmt" sent $((v + i)))" "$(printf "$fmt" received $((v + i + 1)))")
    else
      lines+=("$(printf "$fmt" received $((v + i)))" "$(printf "$fmt" sent $((v + i + 1)))")
    fi
  done
  expect "$file" "${lines[@]}"
}

hello="Hello world!"       # common-hello.c: the string the write/read/flush examples move...
translated="¡Hola Mundo!"  # ...and the client's translation, printed once its operations completed
words=(1st_word 2nd_word 3rd_word)  # run-all-examples.sh's arguments
seeds06=(8 9 11 12)
seeds13=(1 5 10)
rounds=3

# run_case CASE: runs the case's processes (CASE.*.rc, .out, .err; problems in CASE.problems);
# 1 if its server did not start listening (then stopped). The servers of 06 are left to end in
# the background (deferred) and checked at the end.
deferred=()
run_case() {
  local c=$1 ex=${1%%:*} opt='' seed
  [[ $c == *:* ]] && opt=${c#*:}
  server_limit=$limit
  port=$(free_port) || { echo "no free port" >>"$work/$c.problems"; return 1; }
  case $ex in
  06*)
    server_limit=$((limit * 2))
    start_server "$c" || return
    for seed in "${seeds06[@]}"; do client "$c" "client$seed" "$seed"; done
    deferred+=("$c:$server_pid")
    return 0
    ;;
  13*)
    # The server accepts clients until 5 s pass without a new one, then serves them all.
    start_server "$c" 5 || return
    local clients=()
    for seed in "${seeds13[@]}"; do
      client "$c" "client$seed" "$seed" $rounds &
      clients+=($!)
    done
    wait "${clients[@]}"
    ;;
  08srq*) start_server "$c" ${opt:+"$opt"} || return; client "$c" client 7 $rounds ;;
  07*) start_server "$c" || return; client "$c" client "${words[@]}" ;;
  08* | 12*) start_server "$c" || return; client "$c" client 7 $rounds ;;
  10*) start_server "$c" || return; client "$c" client 1234 "${words[0]}" ;;
  11*) start_server "$c" || return; client "$c" client 1234 ;;
  *) start_server "$c" || return; client "$c" client ;;
  esac
  # A server whose clients passed ends on its own (given 20 s); otherwise it may wait for ever.
  if grep -qvx 0 "$work/$c".client*.rc; then finish_server "$c" 1; else finish_server "$c" 20; fi
}

# check_exits CASE: every process of the case exited 0.
check_exits() {
  local c=$1 f
  for f in "$work/$c".*.rc; do
    [ "$(cat "$f")" = 0 ] || echo "$(basename "$f" .rc) exited $(cat "$f")" >>"$work/$c.problems"
  done
}

# check_data CASE: what the processes printed.
check_data() {
  local c=$1 ex=${1%%:*} seed name i
  case $ex in
  01*)
    expect "$c.server.out" "Received a message: Hello server!"
    expect "$c.client.out" "Received a message: Hello client!" ;;
  02*)
    expect "$c.client.out" "Read a message: Hello client!" ;;
  03* | 04*)
    expect "$c.client.out" "Next value: $hello" "Translation: $translated"
    expect "$c.server.out" "New value: $hello" ;;
  05*)
    expect "$c.client.out" "Next value: $hello" \
      "RPMA_FLUSH_TYPE_PERSISTENT is NOT supported, RPMA_FLUSH_TYPE_VISIBILITY is used instead" \
      "Translation: $translated"
    expect "$c.server.out" "New value: $hello" ;;
  06*)
    # Each client picks a name from its seed; the server reads them (RDMA Read) and prints them.
    local names=()
    for seed in "${seeds06[@]}"; do
      name=$(sed -n 's/^My names is: //p' "$work/$c.client$seed.out")
      [ -n "$name" ] || echo "client$seed.out names no name" >>"$work/$c.problems"
      names+=("- $name")
    done
    expect "$c.server.out" "Today I have got in touch with:" "${names[@]}"
    expect "$c.server.err" "Server timed out." ;;
  07*)
    # The log's used offset starts at 16 (offsetof(struct log, data)); the server prints the log.
    expect "$c.client.out" "used value: 16"
    expect "$c.server.out" "${words[@]}" ;;
  08srq*)
    pingpong "$c.client.out" "Value %s: %d" 7 $rounds client
    pingpong "$c.server.out" "Value %s: %d" 7 $rounds server ;;
  08*)
    # while (--rounds): one exchange less than the rounds asked for.
    pingpong "$c.client.out" "Value %s: %d" 7 $((rounds - 1)) client
    pingpong "$c.server.out" "Value %s: %d" 7 $((rounds - 1)) server ;;
  09*)
    expect "$c.client.out" "Next value: $hello" "Translation: $translated"
    expect "$c.server.out" "Flush request received: {offset: 0x0, length: 0x400, op_context: 0xF01D}" \
      "New value: $hello" ;;
  10*)
    expect "$c.client.out" "Sending value '${words[0]}' with immediate data '1234'"
    expect "$c.server.out" "Received value '${words[0]}' with immediate data '1234'" ;;
  11*)
    expect "$c.client.out" "Writing value '1234' with immediate data '1234'"
    expect "$c.server.out" "The value '1234' was written together with immediate data '1234'" ;;
  12*)
    pingpong "$c.client.out" "CLIENT: Value %s: %d" 7 $((rounds - 1)) client
    pingpong "$c.server.out" "SERVER: Value %s: %d" 7 $((rounds - 1)) server ;;
  13*)
    expect "$c.server.out" "The client #${#seeds13[@]} has been connected." "Server ended listening."
    for seed in "${seeds13[@]}"; do
      # "[client #PID] value sent: N"; the server names the client's QP: "... [qp#Q]".
      i=$(sed -n 's/^\[client #\([0-9]*\)\].*/\1/p' "$work/$c.client$seed.out" | head -n 1)
      pingpong "$c.client$seed.out" "[client #$i] value %s: %d" "$seed" $rounds client
      local qp
      qp=$(sed -n "s/^\[server\] value received: $seed from the connection \[qp#\([0-9]*\)\]$/\1/p" \
           "$work/$c.server.out" | head -n 1)
      grep "\[qp#$qp\]$" "$work/$c.server.out" >"$work/$c.server.qp$seed.out"
      pingpong "$c.server.qp$seed.out" "[server] value %s: %d from the connection [qp#$qp]" \
        "$seed" $rounds server
    done ;;
  esac
}

passed=0
listed=0
n_failed=0
# verdict CASE: counts the case and prints what it showed.
verdict() {
  local c=$1 kind=${listed_kind[$1]:-} f
  if [ ! -s "$work/$c.problems" ]; then
    passed=$((passed + 1))
    echo "ok: $c (${took[$c]})"
    [ -n "$kind" ] && echo "note: $c is listed ($kind) in $(basename "$expected") but passed: update the list"
    return
  fi
  if [ -n "$kind" ] && grep -qE -- "${listed_sign[$c]}" "$work/$c".*.out "$work/$c".*.err 2>/dev/null; then
    listed=$((listed + 1))
    echo "listed ($kind): $c: ${listed_why[$c]}"
    return
  fi
  n_failed=$((n_failed + 1))
  echo "FAIL: $c${kind:+ (listed as $kind, but it fails otherwise: no match for /${listed_sign[$c]}/)}:"
  sed 's/^/  /' "$work/$c.problems"
  for f in "$work/$c".*.out "$work/$c".*.err; do
    [ -s "$f" ] || continue
    echo "--- $(basename "$f"):"
    tail -n 15 "$f"
  done
}

# Listed examples that are not run.
if [ ${#only[@]} -eq 0 ]; then
  for name in $(printf '%s\n' "${!listed_kind[@]}" | sort); do
    [ "${listed_sign[$name]}" = "not run" ] || continue
    listed=$((listed + 1))
    echo "listed (${listed_kind[$name]}), not run: $name: ${listed_why[$name]}"
  done
fi

declare -A took started
for c in "${cases[@]}"; do
  if [ -z "${built[${c%%:*}]:-}" ]; then
    echo "did not build" >"$work/$c.problems"
    verdict "$c"
    continue
  fi
  started[$c]=$SECONDS
  if ! run_case "$c"; then
    check_exits "$c"
    verdict "$c"
    continue
  fi
  took[$c]="$((SECONDS - started[$c])) s"
  case " ${deferred[*]} " in *" $c:"*) continue ;; esac
  check_exits "$c"
  check_data "$c"
  verdict "$c"
done
for d in "${deferred[@]}"; do
  c=${d%:*}
  server_pid=${d##*:}
  finish_server "$c" 30
  took[$c]="$((SECONDS - started[$c])) s, the server's 15 s idle end included"
  check_exits "$c"
  check_data "$c"
  verdict "$c"
done

echo "librpma: $passed passed, $((n_failed + failed)) failed, $listed listed (n/a or gap)"
[ $((n_failed + failed)) -eq 0 ]
