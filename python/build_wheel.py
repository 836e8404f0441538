#!/usr/bin/env python3
"""Writes kcache's wheel, kcache-VERSION-py3-none-manylinux_X_Y_x86_64.whl.

Usage: build_wheel.py --kcache BIN --shim SO --reapi SO --package DIR OUT_DIR

The wheel holds, under kcache/ (the layout `bazel run //:install` gives a
PREFIX, so the binary finds its drop-in and plugin unchanged):
  __init__.py, __main__.py        the Python package (DIR): `kcache` and
                                  `python -m kcache` exec bin/kcache
  bin/kcache                      the tool
  lib/kcache/libnvrtc.so.13       the drop-in `kcache run` preloads
  lib/kcache/libkcache_reapi.so   the gRPC plugin, opened for grpc:// remotes
  lib/*.so*                       every library those need that is not part
                                  of glibc or GCC's runtime (libxxhash,
                                  libsqlite3, gRPC's), copied from this
                                  machine under its soname and found through
                                  the release rpath (python/release.bzl)
and kcache-VERSION.dist-info/ with METADATA, WHEEL, entry_points.txt and a
RECORD of every file's sha256 (PEP 427, PEP 376). Made with zipfile only (no
network, no `wheel` package); the same inputs give the same bytes.

VERSION is what `kcache --version` says. The platform tag is this machine's
glibc: the files link against its glibc and libstdc++, so an older system may
lack a symbol version they need (the script prints the newest GLIBC_ and
GLIBCXX_ versions the files need, and fails if one is newer than this glibc).
"""

import argparse
import base64
import hashlib
import os
import platform
import re
import subprocess
import sys
import zipfile

# Libraries every manylinux system has (PEP 600 and auditwheel's policy):
# glibc's and GCC's runtime. Everything else the files need is bundled.
SYSTEM_LIBRARIES = {
    "ld-linux-x86-64.so.2",
    "libc.so.6",
    "libdl.so.2",
    "libgcc_s.so.1",
    "libm.so.6",
    "libnsl.so.1",
    "libpthread.so.0",
    "libresolv.so.2",
    "librt.so.1",
    "libstdc++.so.6",
    "libutil.so.1",
    "linux-vdso.so.1",
}

# Zip entries' time: fixed, so a rebuild of the same files gives the same wheel.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)

METADATA = """\
Metadata-Version: 2.1
Name: kcache
Version: {version}
Summary: A content-addressed PTX/cubin cache for CUDA kernels compiled with NVRTC
Requires-Python: >=3.8
Description-Content-Type: text/markdown

`kcache run -- python app.py` runs a program with kcache's drop-in libnvrtc, so
the NVRTC compiles it makes (CuPy, cuda.core, ctypes) come from the cache when
their source, headers and options are unchanged. `kcache -s` shows the cache.
"""

WHEEL = """\
Wheel-Version: 1.0
Generator: kcache python/build_wheel.py
Root-Is-Purelib: false
Tag: {tag}
"""

ENTRY_POINTS = """\
[console_scripts]
kcache = kcache:main
"""


def run(argv):
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode != 0:
        sys.exit("build_wheel: %s failed (exit %d): %s" % (" ".join(argv), result.returncode,
                                                         result.stderr.strip()))
    return result.stdout


def kcache_version(kcache):
    out = run([kcache, "--version"]).strip()
    match = re.fullmatch(r"kcache (\d+(?:\.\d+)*\S*)", out)
    if not match:
        sys.exit("build_wheel: `%s --version` printed %r, not `kcache VERSION`" % (kcache, out))
    return match.group(1)


def needed_libraries(elf):
    """soname -> path of every library the loader maps for `elf`, by ldd."""
    out = run(["ldd", elf])
    found = {}
    for line in out.splitlines():
        match = re.match(r"\s*(\S+) => (\S+|not found)", line)
        if not match:
            continue  # the vdso and the loader, which have no "=>"
        name, path = match.groups()
        if path == "not found":
            sys.exit("build_wheel: %s needs %s, which this machine lacks "
                     "(tools/install_deps.sh installs kcache's libraries)" % (elf, name))
        found[name] = path
    return found


def bundled_libraries(elves):
    """soname -> path of the libraries the wheel carries: all that elves
    need, less the system's (ldd lists the whole closure)."""
    bundle = {}
    for elf in elves:
        for name, path in needed_libraries(elf).items():
            if name not in SYSTEM_LIBRARIES:
                bundle[name] = path
    return bundle


def newest_versions(paths):
    """The newest GLIBC_ and GLIBCXX_ symbol versions any of paths needs."""
    newest = {}
    for path in paths:
        for family, version in re.findall(r"Name: (GLIBC|GLIBCXX)_([0-9.]+)",
                                          run(["readelf", "-V", "-W", path])):
            parsed = tuple(int(part) for part in version.split("."))
            newest[family] = max(newest.get(family, parsed), parsed)
    return newest


def platform_tag(paths):
    libc, version = platform.libc_ver()
    if libc != "glibc":
        sys.exit("build_wheel: this machine's C library is %r; a manylinux wheel needs glibc" % libc)
    here = tuple(int(part) for part in version.split(".")[:2])
    newest = newest_versions(paths)
    for family, needed in sorted(newest.items()):
        print("build_wheel: the files need %s_%s" % (family, ".".join(map(str, needed))))
    if newest.get("GLIBC", (0,)) > here:
        sys.exit("build_wheel: the files need GLIBC_%s, newer than this machine's glibc %s" %
                 (".".join(map(str, newest["GLIBC"])), version))
    return "manylinux_%d_%d_x86_64" % here


class Wheel:
    """A wheel being written: entries added one by one, RECORD last."""

    def __init__(self, path, dist_info):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.dist_info = dist_info
        self.record = []

    def add(self, name, data, mode=0o644):
        info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
        info.external_attr = (0o100000 | mode) << 16  # a regular file; pip keeps the x bits
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zip.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
        self.record.append("%s,sha256=%s,%d" % (name, digest.decode(), len(data)))

    def add_file(self, name, path, mode=0o644):
        with open(path, "rb") as f:
            self.add(name, f.read(), mode)

    def close(self):
        record = self.dist_info + "/RECORD"
        lines = self.record + [record + ",,"]  # RECORD cannot hold its own hash
        info = zipfile.ZipInfo(record, date_time=ZIP_TIME)
        info.external_attr = (0o100000 | 0o644) << 16
        self.zip.writestr(info, "".join(line + "\n" for line in lines),
                          compress_type=zipfile.ZIP_DEFLATED)
        self.zip.close()


def package_sources(package, version):
    """name -> bytes of the Python package's files, the version written in."""
    sources = {}
    for name in sorted(os.listdir(package)):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(package, name), "rb") as f:
            data = f.read()
        if name == "__init__.py":
            placeholder = b'__version__ = "0+source"'
            if placeholder not in data:
                sys.exit("build_wheel: %s/__init__.py lacks the line %s" %
                         (package, placeholder.decode()))
            data = data.replace(placeholder, b'__version__ = "%s"' % version.encode())
        sources[name] = data
    return sources


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kcache", required=True, help="the kcache binary (-c opt)")
    parser.add_argument("--shim", required=True, help="the drop-in libnvrtc.so.13")
    parser.add_argument("--reapi", required=True, help="the gRPC plugin libkcache_reapi.so")
    parser.add_argument("--package", required=True, help="the folder of kcache/__init__.py")
    parser.add_argument("out_dir", help="the folder to write the wheel into")
    args = parser.parse_args()

    version = kcache_version(args.kcache)
    elves = {
        "kcache/bin/kcache": (args.kcache, 0o755),
        "kcache/lib/kcache/libnvrtc.so.13": (args.shim, 0o644),
        "kcache/lib/kcache/libkcache_reapi.so": (args.reapi, 0o644),
    }
    bundle = bundled_libraries([path for path, _ in elves.values()])
    for name, path in sorted(bundle.items()):
        elves["kcache/lib/" + name] = (path, 0o644)
    tag = "py3-none-" + platform_tag([path for path, _ in elves.values()])

    dist_info = "kcache-%s.dist-info" % version
    path = os.path.join(args.out_dir, "kcache-%s-%s.whl" % (version, tag))
    os.makedirs(args.out_dir, exist_ok=True)
    wheel = Wheel(path, dist_info)
    for name, data in package_sources(args.package, version).items():
        wheel.add("kcache/" + name, data)
    for name, (source, mode) in sorted(elves.items()):
        wheel.add_file(name, source, mode)
    wheel.add(dist_info + "/METADATA", METADATA.format(version=version).encode())
    wheel.add(dist_info + "/WHEEL", WHEEL.format(tag=tag).encode())
    wheel.add(dist_info + "/entry_points.txt", ENTRY_POINTS.encode())
    wheel.add(dist_info + "/top_level.txt", b"kcache\n")
    wheel.close()
    print("build_wheel: %s (%d libraries bundled: %s)" %
          (path, len(bundle), " ".join(sorted(bundle)) or "none"))


if __name__ == "__main__":
    main()
