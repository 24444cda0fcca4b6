#!/usr/bin/env python3
"""list-cubins.py FILE - the cubins inside an object, archive or shared library, printed the way
`cuobjdump --list-elf` prints them, for machines where CUDA's cuobjdump is not installed
(tests/cuda/cubins.sh falls back to it).

nvcc embeds device code in a `.nv_fatbin` section: a fat binary whose entries are PTX text and
cubins, each cubin an ordinary ELF file (machine EM_CUDA, 190) whose header flags carry the SM
architecture: bits 8-15 for ELF ABI version 8 and later (CUDA 12.8+), bits 0-7 before. This
script takes the section out with objcopy (binutils), finds the ELF headers in it and decodes
each one's architecture. A compressed fat binary (nvcc -Xfatbin -compress-all) hides its
cubins; the script says so instead of listing nothing silently.
"""
import os
import struct
import subprocess
import sys
import tempfile

EM_CUDA = 190


def fatbin_section(path, tmpdir):
    out = os.path.join(tmpdir, "fatbin")
    r = subprocess.run(["objcopy", "-O", "binary", "--only-section=.nv_fatbin", path, out],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if r.returncode != 0 or not os.path.exists(out):
        return b""
    with open(out, "rb") as f:
        return f.read()


def cubin_archs(blob):
    """SM numbers of the cubins in a .nv_fatbin section, in order."""
    archs, i = [], 0
    while True:
        i = blob.find(b"\x7fELF", i)
        if i < 0 or i + 0x34 > len(blob):
            return archs
        machine = struct.unpack_from("<H", blob, i + 18)[0]
        if machine == EM_CUDA:
            abi_version = blob[i + 8]
            flags = struct.unpack_from("<I", blob, i + (0x30 if blob[i + 4] == 2 else 0x24))[0]
            archs.append((flags >> 8) & 0xFF if abi_version >= 8 else flags & 0xFF)
        i += 4


def list_file(path, label, tmpdir, counter):
    blob = fatbin_section(path, tmpdir)
    if not blob:
        return 0
    archs = cubin_archs(blob)
    if not archs:
        print(f"{label}: .nv_fatbin of {len(blob)} bytes holds no visible cubin (compressed?)")
    stem = os.path.splitext(os.path.basename(label))[0]
    for sm in archs:
        counter[0] += 1
        print(f"ELF file {counter[0]:4d}: {stem}.{counter[0]}.sm_{sm}.cubin")
    return len(archs)


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    path = sys.argv[1]
    counter = [0]
    with tempfile.TemporaryDirectory() as tmpdir:
        if path.endswith(".a"):
            members = subprocess.run(["ar", "t", path], stdout=subprocess.PIPE, text=True, check=True).stdout.split()
            for m in members:
                member = os.path.join(tmpdir, "member.o")
                with open(member, "wb") as f:
                    f.write(subprocess.run(["ar", "p", path, m], stdout=subprocess.PIPE, check=True).stdout)
                print(f"member {path}:{m}:")
                list_file(member, m, tmpdir, counter)
        else:
            list_file(path, path, tmpdir, counter)
    if counter[0] == 0:
        print(f"{path}: no cubins found", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
