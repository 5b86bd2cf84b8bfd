#!/usr/bin/env bash
# uwarp installed, and used as a user uses it. From a build tree in which everything installed is
# built (scripts/build normal, or scripts/build normal installable), two installed trees:
#   prefix   `cmake --install BUILD --prefix TMP/prefix`
#   package  the Debian package (`cpack -G DEB`, as scripts/package makes it; its control fields
#            and file list checked), unpacked with dpkg-deb -x: the tree is TMP/root/usr
# and in each of them:
#   - the files a user finds: headers, libuwarp.so and libuwarp.a, the CMake package, uwarp.pc,
#     the drop-in libraries in lib/<multiarch>/uwarp and nowhere else, uwarp-run, uwarp-perf and
#     uwarp, each with --help and a manual page that groff renders without a warning;
#   - examples/hello_rdma.cc built against the tree with find_package(uwarp) (uwarp::uwarp and
#     uwarp::uwarp_static) and with pkg-config, each run (its Send, Write and Read checked);
#   - uwarp-perf: a loopback Write, data verified;
#   - uwarp: `uwarp info` (text and JSON) describes the device; `uwarp trace` finds the uwarp-run
#     beside it and runs a program through it;
#   - uwarp-run: Debian's ibv_devices and ibv_devinfo over the tree's libibverbs.so.1
#     (tests/ofa/tools_test.sh), and a loopback rping (server and client, 3 pings validated)
#     over the tree's librdmacm.so.1 (the package's uwarp-run reached through a symlink).
# Once: an installed uwarp-run whose libraries are missing refuses to run the program, naming the
# missing file (the system's libibverbs must not answer in uwarp's place).
# Every command is bounded in time; 20-40 s in all on 2 cores.
#
# Usage: install_test.sh BUILD_DIR. Ends with "install: N passed, N failed, N skipped"; exit
# status 0 when none failed. Checks that need Debian's ibverbs-utils or rdmacm-utils are skipped,
# saying so, without them.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)
build=$(cd "${1:?usage: install_test.sh BUILD_DIR}" && pwd)
. "$source_dir/tests/support/ports.sh"

# Canonical (no symlink in it): the loader's and uwarp-run's paths are compared with it.
work=$(cd "$(mktemp -d /tmp/uwarp-install-test.XXXXXX)" && pwd -P)
trap 'rm -rf "$work"' EXIT
multiarch=$(gcc -print-multiarch)
passed=0
failed=0
skipped=0

# check NAME COMMAND...: one check; COMMAND's output is shown only when it fails (status other
# than 0), or says why it skipped (status 77).
check() {
  local name=$1 rc=0
  shift
  "$@" >"$work/check.log" 2>&1 || rc=$?
  if [ $rc -eq 0 ]; then
    echo "PASS: $name"
    passed=$((passed + 1))
  elif [ $rc -eq 77 ]; then
    echo "SKIP: $name: $(tail -1 "$work/check.log")"
    skipped=$((skipped + 1))
  else
    echo "FAIL: $name"
    sed 's/^/    /' "$work/check.log"
    failed=$((failed + 1))
  fi
}

# expect_line FILE REGEX...: every extended regex matches a line of FILE.
expect_line() {
  local file=$1 re bad=0
  shift
  for re in "$@"; do
    grep -Eq -- "$re" "$file" || { echo "no line of $file matches: $re"; bad=1; }
  done
  [ $bad -eq 0 ] || { echo "--- $file:"; cat "$file"; }
  return $bad
}

# --- the two installations ------------------------------------------------------------------------

install_prefix() {
  timeout 60 cmake --install "$build" --prefix "$work/prefix"
}

# The package as scripts/package makes it, written outside the build tree.
make_package() {
  (cd "$build" && timeout 120 cpack -G DEB -B "$work/deb") || return 1
  ls "$work"/deb/uwarp_*.deb >/dev/null
}

# Depends comes from the ELF files (dpkg-shlibdeps); rdma-core's libraries are not among them,
# uwarp's own being in the package, in their own directory only.
package_control() {
  local deb bad=0 depends names p
  deb=$(ls "$work"/deb/uwarp_*.deb)
  depends=$(dpkg-deb -f "$deb" Depends)
  echo "Depends: $depends"
  [ "$(dpkg-deb -f "$deb" Package)" = uwarp ] || { echo "Package is not uwarp"; bad=1; }
  names=$(sed -E 's/ *\([^)]*\)//g; s/, */\n/g' <<<"$depends")
  for p in libc6 libstdc++6 libisal2; do
    grep -Fxq "$p" <<<"$names" || { echo "Depends lacks $p"; bad=1; }
  done
  if grep -Eq "libibverbs|librdmacm" <<<"$names"; then
    echo "Depends names rdma-core's libraries"
    bad=1
  fi
  if dpkg-deb -c "$deb" | grep -E "lib(ibverbs|rdmacm)\.so" | grep -v "usr/lib/$multiarch/uwarp/"; then
    echo "uwarp's OFA libraries outside usr/lib/$multiarch/uwarp/"
    bad=1
  fi
  return $bad
}

unpack_package() {
  dpkg-deb -x "$(ls "$work"/deb/uwarp_*.deb)" "$work/root"
}

# --- one installed tree: TREE (the prefix) and, for the package, SYSROOT (the unpacked root) -------

# The files a user finds, and uwarp's OFA libraries nowhere but in their own directory.
tree_files() {
  local tree=$1 lib=$1/lib/$multiarch f bad=0 strays
  for f in include/uwarp/uwarp.h include/uwarp/verbs.h include/uwarp/cm.h \
    "lib/$multiarch/libuwarp.so" "lib/$multiarch/libuwarp.a" \
    "lib/$multiarch/cmake/uwarp/uwarpConfig.cmake" "lib/$multiarch/cmake/uwarp/uwarpConfigVersion.cmake" \
    "lib/$multiarch/pkgconfig/uwarp.pc" \
    "lib/$multiarch/uwarp/libibverbs.so.1" "lib/$multiarch/uwarp/librdmacm.so.1" \
    bin/uwarp-run bin/uwarp-perf bin/uwarp \
    share/man/man1/uwarp-run.1 share/man/man1/uwarp-perf.1 share/man/man1/uwarp.1; do
    [ -e "$tree/$f" ] || { echo "missing: $tree/$f"; bad=1; }
  done
  strays=$(find "$tree" \( -name 'libibverbs*' -o -name 'librdmacm*' \) ! -path "$lib/uwarp/*")
  [ -z "$strays" ] || { echo "outside $lib/uwarp: $strays"; bad=1; }
  return $bad
}

# libuwarp.so exports the native API (src/libuwarp.map): members of include/uwarp's classes,
# under one version node, and nothing of the layers beneath (uwarp::verbs::, uwarp::runtime::, ...).
tree_exports() {
  local so=$1/lib/$multiarch/libuwarp.so bad=0 inner
  nm -D --defined-only -C "$so" >"$work/exports" || { echo "nm $so: status $?"; return 1; }
  grep -q " uwarp::Context::open(" "$work/exports" || { echo "uwarp::Context::open is not exported"; bad=1; }
  inner=$(grep -E " (typeinfo (name )?for |vtable for )?uwarp::[a-z_]+::" "$work/exports" | grep -v " uwarp::to_string(" | head -5)
  [ -z "$inner" ] || { echo "exported from beneath the API:"; echo "$inner"; bad=1; }
  objdump -T "$so" >"$work/versions" || { echo "objdump $so: status $?"; return 1; }
  grep -q " UWARP_0 " "$work/versions" || { echo "no symbol of version UWARP_0"; bad=1; }
  return $bad
}

# --help of each program (status 0, its usage on stdout) and its manual page, which groff renders
# without a warning.
tree_help() {
  local tree=$1 bad=0 page
  "$tree/bin/uwarp-run" --help >"$work/help" || { echo "uwarp-run --help: status $?"; bad=1; }
  expect_line "$work/help" "^usage: uwarp-run " "^uwarp's libraries: $tree/lib/$multiarch/uwarp$" || bad=1
  "$tree/bin/uwarp-perf" --help >"$work/help" || { echo "uwarp-perf --help: status $?"; bad=1; }
  expect_line "$work/help" "^usage:" "uwarp-perf loopback" || bad=1
  "$tree/bin/uwarp" --help >"$work/help" || { echo "uwarp --help: status $?"; bad=1; }
  expect_line "$work/help" "^usage: uwarp COMMAND" "^  info " "^  stat " "^  trace " || bad=1
  for cmd in info stat trace; do
    "$tree/bin/uwarp" "$cmd" --help >"$work/help" || { echo "uwarp $cmd --help: status $?"; bad=1; }
    expect_line "$work/help" "^usage: uwarp $cmd" || bad=1
  done
  for page in "$tree"/share/man/man1/uwarp-{run,perf}.1 "$tree"/share/man/man1/uwarp.1; do
    groff -man -Tutf8 -ww -z "$page" 2>"$work/groff" || { echo "groff $page: status $?"; bad=1; }
    [ ! -s "$work/groff" ] || { echo "groff $page:"; cat "$work/groff"; bad=1; }
  done
  return $bad
}

# hello_rdma's own checks passed (it exits 0 only then) and it printed both results.
run_hello() {
  timeout 60 "$@" >"$work/hello.out" 2>&1 || { echo "hello_rdma: status $?"; cat "$work/hello.out"; return 1; }
  expect_line "$work/hello.out" '^server received: "hello over iWARP"$' '^client read back: "written by RDMA"$'
}

# example_cmake TREE NAME [CMAKE_ARGS...]: examples/ as a project of its own, which must find
# uwarp with find_package in TREE (not a uwarp installed on the system), built and run.
example_cmake() {
  local tree=$1 name=$2 dir=$work/example-$2
  shift 2
  if ! { timeout 120 cmake -S "$source_dir/examples" -B "$dir" -G Ninja -DCMAKE_PREFIX_PATH="$tree" "$@" &&
    timeout 120 cmake --build "$dir"; } >"$dir.log" 2>&1; then
    cat "$dir.log"
    return 1
  fi
  expect_line "$dir/CMakeCache.txt" "^uwarp_DIR:PATH=$tree/lib/$multiarch/cmake/uwarp$" || return 1
  run_hello "$dir/hello_rdma"
}

# The shared library the program loads is the tree's.
example_cmake_shared() {
  example_cmake "$1" "$2-shared" || return 1
  LD_TRACE_LOADED_OBJECTS=1 "$work/example-$2-shared/hello_rdma" >"$work/loaded"
  expect_line "$work/loaded" "libuwarp\.so\.[0-9.]+ => $1/lib/$multiarch/libuwarp\.so"
}

# A static program: no libuwarp.so needed.
example_cmake_static() {
  example_cmake "$1" "$2-static" -DUWARP_STATIC=ON || return 1
  if LD_TRACE_LOADED_OBJECTS=1 "$work/example-$2-static/hello_rdma" | grep libuwarp; then
    echo "the static build loads libuwarp.so"
    return 1
  fi
}

# pkg-config over TREE's uwarp.pc only; for the package's tree, SYSROOT is the unpacked root its
# paths (under /usr) are moved into.
example_pkg_config() {
  local tree=$1 name=$2 sysroot=${3:-} flags
  flags=$(PKG_CONFIG_LIBDIR="$tree/lib/$multiarch/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$sysroot" \
    pkg-config --cflags --libs uwarp) || return 1
  echo "pkg-config: $flags"
  grep -q -- "-I$tree/include" <<<"$flags" || { echo "no -I$tree/include"; return 1; }
  # shellcheck disable=SC2086 # the flags are words
  timeout 120 g++ -std=c++20 -o "$work/hello-$name-pc" "$source_dir/examples/hello_rdma.cc" $flags \
    -Wl,-rpath,"$tree/lib/$multiarch" || return 1
  run_hello "$work/hello-$name-pc"
}

tree_perf() {
  timeout 60 "$1/bin/uwarp-perf" loopback --op write --sizes 4K,64K --iters 200 --verify --no-progress
}

# uwarp info from the tree: the device, its version and I/O backend, as text and as JSON; and
# uwarp trace, which runs a program through the uwarp-run beside it (with UWARP_PCAP set).
tree_uwarp() {
  local tree=$1
  timeout 30 "$tree/bin/uwarp" info >"$work/info" 2>&1 || { echo "uwarp info: status $?"; cat "$work/info"; return 1; }
  expect_line "$work/info" "^device +uwarp0" "^version +[0-9]+\.[0-9]+\.[0-9]+$" \
    "^I/O backend +(io_uring|epoll)$" "^  max_qp_wr +32768$" || return 1
  timeout 30 "$tree/bin/uwarp" info --json >"$work/info.json" 2>&1 || { echo "uwarp info --json: status $?"; return 1; }
  expect_line "$work/info.json" '^\{"device":"uwarp0",.*"limits":\{"max_qp":' || return 1
  timeout 30 "$tree/bin/uwarp" trace -o "$work/trace.pcap" -- sh -c 'echo "pcap=$UWARP_PCAP"' \
    >"$work/trace" 2>&1 || { echo "uwarp trace: status $?"; cat "$work/trace"; return 1; }
  expect_line "$work/trace" "^pcap=$work/trace\.pcap$"
}

# RUN: how the tree's uwarp-run is invoked. rping's libraries are the tree's (the loader says so),
# and uwarp answers its rdma_cm calls (--debug: uwarp's trace of its core events).
tree_rping() {
  local run=$1 ofa=$2 port server rc=0 server_rc=0
  command -v rping >/dev/null || { echo "rping not installed (Debian package rdmacm-utils)"; return 77; }
  "$run" sh -c 'LD_TRACE_LOADED_OBJECTS=1 rping' >"$work/loaded" 2>&1
  expect_line "$work/loaded" "librdmacm\.so\.1 => $ofa/librdmacm\.so\.1" \
    "libibverbs\.so\.1 => $ofa/libibverbs\.so\.1" || return 1
  port=$(free_port) || return 1
  timeout 30 "$run" rping -s -a 127.0.0.1 -p "$port" -C 3 -v >"$work/rping.server" 2>&1 &
  server=$!
  wait_listen "$port" "$server" || { echo "the rping server does not listen"; cat "$work/rping.server"; }
  timeout 30 "$run" --debug rping -c -a 127.0.0.1 -p "$port" -C 3 -v -V >"$work/rping.client" 2>&1 ||
    { rc=$?; echo "rping client: status $rc"; }
  end_server "$server" 10 || server_rc=$?
  [ $server_rc -eq 0 ] || { rc=1; echo "rping server: status $server_rc"; cat "$work/rping.server"; }
  expect_line "$work/rping.client" "^ping data: rdma-ping-0: " "^ping data: rdma-ping-1: " \
    "^ping data: rdma-ping-2: " "^uwarp: debug: rdmacm: core event " || rc=1
  [ $rc -eq 0 ] || cat "$work/rping.client"
  return $rc
}

# Every check of one tree. SYSROOT: the unpacked root of the package's tree, else empty. RUN: how
# its uwarp-run is invoked.
check_tree() {
  local name=$1 tree=$2 sysroot=$3 run=$4 ofa=$2/lib/$multiarch/uwarp
  check "$name: installed files" tree_files "$tree"
  check "$name: --help and manual pages" tree_help "$tree"
  check "$name: libuwarp.so exports the native API only" tree_exports "$tree"
  check "$name: hello_rdma with find_package(uwarp), libuwarp.so" example_cmake_shared "$tree" "$name"
  check "$name: hello_rdma with find_package(uwarp), libuwarp.a" example_cmake_static "$tree" "$name"
  check "$name: hello_rdma with pkg-config" example_pkg_config "$tree" "$name" "$sysroot"
  check "$name: uwarp-perf loopback Write, verified" tree_perf "$tree"
  check "$name: uwarp info, uwarp trace" tree_uwarp "$tree"
  check "$name: uwarp-run ibv_devices, ibv_devinfo" "$source_dir/tests/ofa/tools_test.sh" "$run" "$ofa"
  check "$name: uwarp-run rping loopback, 3 pings validated" tree_rping "$run" "$ofa"
}

# An installed uwarp-run without its libraries beside it runs nothing and names the first missing
# file.
refuses_without_libraries() {
  local bare=$work/bare rc=0
  mkdir -p "$bare/bin"
  cp "$work/prefix/bin/uwarp-run" "$bare/bin/"
  "$bare/bin/uwarp-run" ibv_devinfo >"$work/refusal" 2>&1 || rc=$?
  [ $rc -eq 127 ] || { echo "status $rc, not 127"; cat "$work/refusal"; return 1; }
  expect_line "$work/refusal" "^uwarp-run: $bare/lib/$multiarch/uwarp/libibverbs\.so\.1 is missing" || return 1
  if grep -q "Failed to get IB devices list" "$work/refusal"; then
    echo "ibv_devinfo ran"
    return 1
  fi
}

[ -x "$build/bin/uwarp-run" ] || { echo "install_test: SKIPPED: $build has no uwarp-run (libibverbs-dev missing)"; exit 77; }
start=$SECONDS
check "prefix: cmake --install --prefix" install_prefix
check "package: cpack -G DEB" make_package
check "package: control fields and file list" package_control
check "package: dpkg-deb -x" unpack_package
check "prefix: uwarp-run refuses to run without its libraries" refuses_without_libraries
check_tree prefix "$work/prefix" "" "$work/prefix/bin/uwarp-run"
mkdir -p "$work/elsewhere"
ln -s "$work/root/usr/bin/uwarp-run" "$work/elsewhere/uwarp-run"
check_tree package "$work/root/usr" "$work/root" "$work/elsewhere/uwarp-run"
echo "install: $passed passed, $failed failed, $skipped skipped ($((SECONDS - start)) s)"
[ $failed -eq 0 ]
