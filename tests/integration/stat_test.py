#!/usr/bin/env python3
"""uwarp stat against real traffic: a uwarp-perf server and client on 127.0.0.1 move a known
number of RDMA Writes; while the client holds its connections open (--hold), `uwarp stat --json`
of each process must show counters that match the traffic: the Writes posted and completed
exactly, at least their payload in bytes each way, FPDUs, no CRC error, no Terminate. Then the
client exits and its statistics file must be gone, and `uwarp stat` (no PID) must list the
server. Every wait is bounded.

usage: stat_test.py UWARP_PERF UWARP
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

SIZE = 65536
ITERS = 200
WRITES = ITERS + ITERS // 8 + 1  # uwarp-perf's warm-up run (runner.h: warmup_iters) and the run
HOLD_S = 4


def fail(why):
    print("FAIL: " + why)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stat(uwarp, pid):
    out = subprocess.run([uwarp, "stat", "--json", str(pid)], capture_output=True, text=True,
                         timeout=20)
    if out.returncode != 0:
        return None, out.stderr.strip()
    return json.loads(out.stdout), ""


def check(cond, why, failures):
    if not cond:
        failures.append(why)


def main():
    perf, uwarp = sys.argv[1], sys.argv[2]
    env = dict(os.environ)
    env.pop("UWARP_STATS", None)
    port = free_port()
    server = subprocess.Popen([perf, "server", "--addr", "127.0.0.1", "--port", str(port)],
                              stderr=subprocess.PIPE, text=True, env=env)
    client = None
    try:
        deadline = time.monotonic() + 20
        line = ""
        while "listening" not in line:
            if time.monotonic() > deadline or server.poll() is not None:
                fail("the server did not start: " + line)
            line = server.stderr.readline()
        client = subprocess.Popen(
            [perf, "client", "127.0.0.1", "--port", str(port), "--op", "write", "--size",
             str(SIZE), "--iters", str(ITERS), "--no-latency", "--no-progress", "--crc",
             "--json", "--hold", str(HOLD_S)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

        # Sample until the client's Writes have all completed (they take well under a second;
        # the client then holds its QPs for HOLD_S seconds).
        deadline = time.monotonic() + 30
        snap, why = None, ""
        while time.monotonic() < deadline and client.poll() is None:
            snap, why = stat(uwarp, client.pid)
            if snap and any(q["counters"]["completed_success"] >= WRITES + 2 and
                            q["counters"]["posted_write"] == WRITES for q in snap["qps"]):
                break
            time.sleep(0.1)
        else:
            out, err = client.communicate(timeout=30) if client.poll() is not None else ("", "")
            fail("no snapshot of the client with its %d Writes completed (last: %s %s; client: %s)"
                 % (WRITES, why, json.dumps(snap)[:2000] if snap else "none", err[-2000:]))
        server_snap, why = stat(uwarp, server.pid)
        if not server_snap:
            fail("no snapshot of the server: " + why)

        failures = []
        check(snap["pid"] == client.pid, "the snapshot names another process", failures)
        check(snap["program"].startswith("uwarp-perf"), "program: " + snap["program"], failures)
        check(len(snap["devices"]) == 1, "client devices: %d" % len(snap["devices"]), failures)
        data = [q for q in snap["qps"] if q["counters"]["posted_write"] > 0]
        check(len(data) == 1, "client QPs with Writes: %d" % len(data), failures)
        if data:
            c = data[0]["counters"]
            check(c["posted_write"] == WRITES, "posted_write %d != %d" % (c["posted_write"], WRITES),
                  failures)
            # Each Write run ends with one RDMA Read on the data QP (uwarp-perf's flush_writes); every request
            # is signaled, so each has its completion.
            check(c["posted_read"] == 2, "posted_read %d != 2" % c["posted_read"], failures)
            check(c["completed_success"] == c["posted_write"] + c["posted_read"],
                  "data QP completed_success %d != posted %d"
                  % (c["completed_success"], c["posted_write"] + c["posted_read"]), failures)
            check(c["tx_bytes"] >= WRITES * SIZE,
                  "tx_bytes %d < %d" % (c["tx_bytes"], WRITES * SIZE), failures)
            check(c["tx_fpdus"] >= WRITES * (SIZE // 65000 + 1),
                  "tx_fpdus %d" % c["tx_fpdus"], failures)
            check(data[0]["peer"] == "127.0.0.1:%d" % port, "peer " + data[0]["peer"], failures)
            check(data[0]["connections"] == 1, "connections %d" % data[0]["connections"], failures)
            check(data[0]["tcp"]["rtt_us"] > 0, "no TCP RTT sampled", failures)
        dev = snap["devices"][0]["counters"] if snap["devices"] else {}
        for name in ("crc_errors", "terminates_sent", "terminates_received",
                     "completed_wr_flush_error", "completed_remote_access_error"):
            check(dev.get(name, -1) == 0, "client %s = %s" % (name, dev.get(name)), failures)
        check(dev.get("posted_write") == WRITES, "device posted_write %s" % dev.get("posted_write"),
              failures)
        check(dev.get("posted_send", 0) > 0 and dev.get("posted_recv", 0) > 0,
              "no control Sends and receives counted", failures)
        check(snap["devices"][0]["qps_live"] == 2 if snap["devices"] else False,
              "client live QPs (control + data) != 2", failures)

        sdev = server_snap["devices"][0]["counters"] if server_snap["devices"] else {}
        check(sdev.get("rx_bytes", 0) >= WRITES * SIZE,
              "server rx_bytes %s < %d" % (sdev.get("rx_bytes"), WRITES * SIZE), failures)
        check(sdev.get("crc_errors", -1) == 0, "server crc_errors %s" % sdev.get("crc_errors"),
              failures)
        srv_data = [q for q in server_snap["qps"] if q["counters"]["rx_bytes"] >= WRITES * SIZE]
        check(len(srv_data) == 1, "server QPs that received the Writes: %d" % len(srv_data), failures)
        if srv_data and data:
            # Every FPDU the client framed for the data QP arrived (the sample of the server
            # follows the client's, whose Writes had all completed: all of them were sent).
            check(srv_data[0]["counters"]["rx_fpdus"] >= data[0]["counters"]["tx_fpdus"],
                  "server rx_fpdus %d < client tx_fpdus %d"
                  % (srv_data[0]["counters"]["rx_fpdus"], data[0]["counters"]["tx_fpdus"]),
                  failures)

        listing = subprocess.run([uwarp, "stat", "--json"], capture_output=True, text=True,
                                 timeout=20)
        pids = [p["pid"] for p in json.loads(listing.stdout)] if listing.returncode == 0 else []
        check(server.pid in pids and client.pid in pids, "listing %s" % pids, failures)
        human = subprocess.run([uwarp, "stat", str(client.pid)], capture_output=True, text=True,
                               timeout=20)
        check(human.returncode == 0 and "uwarp0" in human.stdout, "uwarp stat PID: " +
              human.stdout[-500:] + human.stderr[-500:], failures)
        rates = subprocess.run([uwarp, "stat", str(server.pid), "-i", "0.2", "-n", "2"],
                               capture_output=True, text=True, timeout=20)
        check(rates.returncode == 0 and rates.stdout.count("rates per second") == 2,
              "uwarp stat -i -n: " + rates.stdout[-500:] + rates.stderr[-500:], failures)

        out, err = client.communicate(timeout=HOLD_S + 30)
        check(client.returncode == 0, "client exit %d: %s" % (client.returncode, err[-1000:]),
              failures)
        gone = subprocess.run([uwarp, "stat", "--json", str(client.pid)], capture_output=True,
                              text=True, timeout=20)
        check(gone.returncode == 1, "the exited client's statistics are still there", failures)
        if failures:
            print(json.dumps(snap, indent=1)[:6000])
            fail("; ".join(failures))
        c = data[0]["counters"]
        print("PASS: %d Writes of %d B: client tx %d B in %d FPDUs, server rx %d B; CRC errors 0"
              % (WRITES, SIZE, c["tx_bytes"], c["tx_fpdus"], sdev["rx_bytes"]))
    finally:
        for p in (client, server):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()


if __name__ == "__main__":
    main()
