#!/usr/bin/env python3
"""Damages a safetensors file or a config.json in place, for the corrupt-
checkpoint tests (tests/test_corrupt_cli.sh). Standard library only.

  damage_st.py FILE drop REGEX            delete every tensor whose name matches
  damage_st.py FILE copy REGEX FROM TO    add a copy of each match, FROM -> TO in its name
  damage_st.py FILE shape NAME DIMS       reshape NAME (comma-separated dims, "" for 0-d;
                                          data cut or zero-padded to fit)
  damage_st.py CONFIG set KEY JSON        config.json: KEY = the JSON value (JSON "DELETE" removes it)
  damage_st.py batch SPEC SRC ROOT        each SPEC line "ID<TAB>FILE<TAB>OP<TAB>ARG...": ROOT/ID is a
                                          copy of the model folder SRC, FILE in it damaged by OP
                                          (one process for every case: the sanitizer runs preload
                                          GPU drivers into each process, which makes Python slow)
"""
import json
import re
import struct
import sys

SIZES = {"F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "I32": 4, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1}


def load(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = h.pop("__metadata__", None)
    data = b[8 + n:]
    return meta, {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items()}


def save(p, meta, t):
    h, blobs, off = {}, [], 0
    if meta is not None:
        h["__metadata__"] = meta
    for k, (dt, shape, blob) in t.items():
        h[k] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    j = json.dumps(h).encode()
    j += b" " * (-len(j) % 8)
    open(p, "wb").write(struct.pack("<Q", len(j)) + j + b"".join(blobs))


def batch(spec, src, root):
    import os
    import shutil
    for line in open(spec):
        f = line.rstrip("\n").split("\t")
        d = os.path.join(root, f[0])
        if not os.path.exists(d):
            shutil.copytree(src, d)
        main([os.path.join(d, f[1])] + f[2:])


def main(a):
    if a[0] == "batch":
        return batch(a[1], a[2], a[3])
    path, op = a[0], a[1]
    if op == "set":
        c = json.load(open(path))
        v = json.loads(a[3])
        if v == "DELETE":
            c.pop(a[2], None)
        else:
            c[a[2]] = v
        open(path, "w").write(json.dumps(c, indent=1))
        return
    meta, t = load(path)
    if op == "drop":
        t = {k: v for k, v in t.items() if not re.search(a[2], k)}
    elif op == "copy":
        for k in [k for k in t if re.search(a[2], k)]:
            t[k.replace(a[3], a[4])] = t[k]
    elif op == "shape":
        dt, _, blob = t[a[2]]
        dims = [int(x) for x in a[3].split(",") if x]
        n = SIZES[dt]
        for d in dims:
            n *= d
        t[a[2]] = (dt, dims, (blob + bytes(n))[:n])
    else:
        sys.exit("unknown op " + op)
    save(path, meta, t)


main(sys.argv[1:])
