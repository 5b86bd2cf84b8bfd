#!/usr/bin/env python3
"""Runs rdma-core 44's own test suite (../shared/conformance/rdma-core-44.0-tests, with Debian's
python3-pyverbs) over uwarp through uwarp-run, unmodified, and checks the outcome: every test
passes or is skipped by the suite itself, except those in rdma_core_expected.txt, each of which
must end in the error written there. Prints the counts and the skip reasons.

The suite runs from a copy (it writes __pycache__) in a private mount namespace in which
/sys/class/infiniband/uwarp0/device/net/lo exists: its rdma_cm tests look for the device's
network interface there, and skip without one.

Usage: tests/apps/rdma_core_tests.py [BIN_DIR]   (default build/bin; prints SKIPPED and exits 0
when the suite or pyverbs is missing)
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SUITE = os.path.join(ROOT, "..", "shared", "conformance", "rdma-core-44.0-tests")
EXPECTED = os.path.join(HERE, "rdma_core_expected.txt")
TIME_LIMIT_S = 900

# Inside the private mount namespace: /sys/class as it is, plus the device's network interface.
SYSFS_SHIM = r"""
set -e
orig=$(mktemp -d)
mount --bind /sys/class "$orig"
mount -t tmpfs uwarp-sysclass /sys/class
for c in "$orig"/*; do
  mkdir "/sys/class/${c##*/}"
  mount --bind "$c" "/sys/class/${c##*/}"
done
mkdir -p /sys/class/infiniband/uwarp0/device/net/lo
exec "$@"
"""


def skip(why):
    print(f"rdma_core_tests: SKIPPED: {why}")
    sys.exit(0)


def load_expected():
    out = {}
    with open(EXPECTED) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            test, kind, text, why = (p.strip() for p in line.split("|", 3))
            out[test] = (kind, text, why)
    return out


def main():
    bin_dir = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bin"))
    run = os.path.join(bin_dir, "uwarp-run")
    if not os.path.isdir(SUITE):
        skip(f"rdma-core's tests are not at {SUITE}")
    if not os.access(run, os.X_OK):
        print(f"rdma_core_tests: {run} missing", file=sys.stderr)
        sys.exit(1)
    if subprocess.run(["/usr/bin/python3", "-c", "import pyverbs"], capture_output=True).returncode != 0:
        skip("python3-pyverbs is not installed (scripts/setup installs it)")
    shim = os.geteuid() == 0 and shutil.which("unshare") is not None
    with tempfile.TemporaryDirectory() as work:
        suite = os.path.join(work, "tests")
        shutil.copytree(SUITE, suite)
        cmd = [run, "/usr/bin/python3", "run_tests.py", "--dev", "uwarp0", "-v"]
        if shim:
            cmd = ["unshare", "-m", "--propagation", "private", "bash", "-c", SYSFS_SHIM, "shim"] + cmd
        else:
            print("rdma_core_tests: not root: no private mount namespace, so the rdma_cm tests skip")
        try:
            # One stream, unbuffered: what a test prints (its two sides' errors) stays inside
            # that test's section of the log.
            p = subprocess.run(cmd, cwd=suite, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=TIME_LIMIT_S, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        except subprocess.TimeoutExpired:
            print(f"rdma_core_tests: FAIL: the suite did not finish within {TIME_LIMIT_S} s")
            sys.exit(1)
        log = p.stdout
        with open(os.path.join(work, "log"), "w") as f:
            f.write(log)
        return judge(log, load_expected())


def judge(log, expected):
    # unittest -v: "name (id) ... ok|skipped 'why'|ERROR|FAIL", output may come between.
    results = {}
    skips = collections.Counter()
    sections = {}
    for m in re.finditer(r"^(\w+) \(([\w.]+)\)(?:\n[^\n]*)?\s\.\.\. (.*?)(ok|skipped ['\"](.*?)['\"]|ERROR|FAIL)$",
                         log, re.M | re.S):
        test, outcome = m.group(2), m.group(4)
        if outcome.startswith("skipped"):
            outcome = "skipped"
            skips[m.group(5)] += 1
        results[test] = outcome
        sections[test] = m.group(0)
    # The tracebacks, by test.
    for m in re.finditer(r"^(?:ERROR|FAIL): \w+ \(([\w.]+)\)\n(.*?)(?=^={70}$|^-{70}$\n^Ran )", log, re.M | re.S):
        sections[m.group(1)] = sections.get(m.group(1), "") + m.group(2)
    ran = re.search(r"^Ran (\d+) tests? in", log, re.M)
    problems = []
    if not ran:
        problems.append("the suite did not report a result: " + log[-2000:])
    elif int(ran.group(1)) != len(results):
        problems.append(f"parsed {len(results)} results of {ran.group(1)} tests")
    for test, outcome in sorted(results.items()):
        if outcome not in ("ERROR", "FAIL"):
            continue
        if test not in expected:
            problems.append(f"{test}: {outcome}\n{sections.get(test, '')[-1500:]}")
        elif expected[test][1] not in sections.get(test, ""):
            problems.append(f"{test}: {outcome}, but not with '{expected[test][1]}'\n{sections.get(test, '')[-1500:]}")
    for test in expected:
        if results.get(test) not in ("ERROR", "FAIL"):
            problems.append(f"{test}: listed in rdma_core_expected.txt but {results.get(test, 'not run')}")
    counts = collections.Counter(results.values())
    kinds = collections.Counter(expected[t][0] for t in expected if results.get(t) in ("ERROR", "FAIL"))
    print(f"rdma_core_tests: {len(results)} tests: {counts['ok']} passed, {counts['skipped']} skipped by "
          f"the suite, {kinds['n/a']} cannot apply to iWARP, {kinds['gap']} known gaps "
          f"(rdma_core_expected.txt), {len(problems)} problems")
    for why, n in skips.most_common():
        print(f"  skipped {n:3d}: {why}")
    for problem in problems:
        print(f"rdma_core_tests: FAIL: {problem}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
