#!/usr/bin/python3
"""tests/interop/fpdu_walk.py: tells a frame tshark calls "Malformed" because it lost the FPDU
boundaries of a stream from one that carries a malformed FPDU.

  tests/interop/fpdu_walk.py PCAP FRAME
  tests/interop/fpdu_walk.py --self-test

tshark's MPA dissector finds FPDUs where TCP segments begin; the guest of the siw matrix gets its
segments from QEMU's user network, which cuts the stream where it likes, and tshark then now and
then takes the middle of an FPDU for its start. This script rebuilds the TCP byte stream of
FRAME's direction (as fpdu_crc.py does), skips its MPA request or reply, and walks every FPDU by
its length field (no markers): each must hold a whole DDP header of version 1 and an RDMAP
header of version 1, and the stream must end at an FPDU boundary (or inside its last FPDU, cut by
the capture's end). It prints what it found.

Exit status: 0 every FPDU of the stream is well formed and FRAME begins inside one (tshark lost
the boundaries there: not a wire problem); 1 the stream has a malformed FPDU, or FRAME begins at
an FPDU boundary (tshark's verdict stands); 2 the capture cannot be analysed (a gap in the
stream, no MPA frame, tshark missing). --self-test writes small captures (a segment that begins
inside a well-formed FPDU, one at an FPDU's start, an FPDU of the wrong DDP version) and checks
the verdicts; exit 77 (skipped) without tshark.
"""
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import shutil  # noqa: E402
import tempfile  # noqa: E402

from fpdu_crc import MPA_KEYS, _fpdu, _pcap, mpa_frame_length, streams  # noqa: E402

DDP_TAGGED_HEADER = 14
DDP_UNTAGGED_HEADER = 18


def walk(data):
    """(boundaries, problem): the stream offsets where FPDUs begin, and the first malformed one."""
    off = mpa_frame_length(data)
    if off is None:
        return None, "the stream does not start with an MPA request or reply"
    starts = []
    while off + 2 <= len(data):
        starts.append(off)
        ulpdu = struct.unpack(">H", data[off:off + 2])[0]
        end = off + 2 + ulpdu + (-(2 + ulpdu) % 4) + 4
        if ulpdu >= 2:
            ctrl, rdmap = data[off + 2], data[off + 3]
            header = DDP_TAGGED_HEADER if ctrl & 0x80 else DDP_UNTAGGED_HEADER
            if ulpdu < header:
                return starts, f"FPDU at stream offset {off}: ULPDU of {ulpdu} bytes, shorter than its DDP header"
            if ctrl & 0x03 != 1 or rdmap >> 6 != 1:
                return starts, f"FPDU at stream offset {off}: DDP version {ctrl & 3}, RDMAP version {rdmap >> 6}"
        else:
            return starts, f"FPDU at stream offset {off}: ULPDU of {ulpdu} bytes"
        if end > len(data):
            break  # the capture ends inside this FPDU
        off = end
    return starts, None


def verdict(pcap, frame):
    """(exit status, what was found) for FRAME of PCAP."""
    try:
        all_streams = streams(pcap)
    except (OSError, ValueError, subprocess.CalledProcessError) as e:
        return 2, f"fpdu_walk: cannot analyse {pcap}: {e}"
    for (src, dst), (data, frames) in all_streams.items():
        at = [start for f, start, _ in frames if f == frame]
        if not at:
            continue
        starts, problem = walk(data)
        if starts is None:
            return 2, f"fpdu_walk: ports {src}->{dst}: {problem}"
        if problem:
            return 1, f"fpdu_walk: ports {src}->{dst}: {problem}"
        if at[0] in set(starts):
            return 1, f"fpdu_walk: frame {frame} begins at the FPDU at stream offset {at[0]}"
        return 0, (f"fpdu_walk: ports {src}->{dst}: {len(starts)} FPDUs, all well formed; frame {frame} "
                   f"begins inside one (stream offset {at[0]}): tshark lost the FPDU boundaries there")
    return 2, f"fpdu_walk: frame {frame} carries no TCP payload in {pcap}"


def self_test():
    if not shutil.which("tshark"):
        print("fpdu_walk: SKIPPED: tshark is not installed")
        return 77
    request = MPA_KEYS[0] + bytes(4)
    reply = MPA_KEYS[1] + bytes(4)
    payload = bytes(range(256)) * 4
    good = reply + _fpdu(payload) + _fpdu(payload)
    bad_fpdu = bytearray(_fpdu(payload))
    bad_fpdu[2] = (bad_fpdu[2] & ~3) | 2  # DDP version 2
    bad = reply + _fpdu(payload) + bytes(bad_fpdu)
    first = len(reply) + len(_fpdu(payload))  # where the second FPDU begins
    # (name, stream, where its second data segment begins, expected verdict)
    cases = [("inside an FPDU", good, first - 100, 0), ("at an FPDU", good, first, 1),
             ("a malformed FPDU", bad, first - 100, 1)]
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.pcap")
        for name, stream, cut, want in cases:
            # frame 0 (numbered 1 by tshark): the request; frames 2 and 3: the stream in two pieces
            _pcap(path, [(1000, 7, 1, request), (7, 1000, 1, stream[:cut]), (7, 1000, 1 + cut, stream[cut:])])
            got, line = verdict(path, 3)
            ok = got == want
            failures += not ok
            print(f"fpdu_walk self-test {name}: {'ok' if ok else 'FAIL'} (verdict {got}, expected {want})")
            print("  " + line)
    return 1 if failures else 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    got, line = verdict(sys.argv[1], int(sys.argv[2]))
    print(line)
    return got

if __name__ == "__main__":
    sys.exit(main())
