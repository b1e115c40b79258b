#!/usr/bin/env python3
"""Golden vectors for qport's activation quantizers (docs/semantics.md §6,
§8, §12, §13, §18).

Independent evidence: each quantizer is re-derived here from docs/semantics.md's
text with numpy float32 arithmetic (IEEE, correctly rounded per op) and
PyPI ml_dtypes casts for the element formats; tests/test_quant_golden.c
compares qport with the committed output bit for bit.

Where vLLM's kernel semantics (docs/semantics.md) differ from what numpy or a
library cast would do, this script follows vLLM's kernels and says so:
  - int8 conversions are PTX cvt.rni.sat: NaN -> 0 and saturation (numpy's
    astype would be undefined for NaN/out of range); int32 adds wrap.
  - max/min reductions use fmaxf/fminf semantics (the non-NaN operand wins),
    as the CUDA block reductions do, i.e. np.fmax/np.fmin, not np.max.
  - fp8: clamp to +-448 with fminf/fmaxf first, so NaN -> +448 (0x7E);
    ml_dtypes alone would give NaN.
  - MX / NVFP4 elements: values are clamped to +-max before the ml_dtypes
    cast (RNE with saturation, docs/semantics.md §6); a NaN element encodes as +max
    (0x07 fp4, 0x1F fp6: the formats have no NaN; CUDA's
    cvt.rn.satfinite does the same for fp4), 0x7F for fp8 (a NaN block scale
    of 255 makes every element of the block NaN). ml_dtypes has no
    satfinite mode and gives NaN or a signed zero.
  - the MX shared scale follows Quark's even_round reference in fp32: a
    carry past FLT_MAX is +inf, so the exponent clamps to 127.

File format (text; '#' starts a comment):
  case KIND NAME M K P1 P2      one quantizer call; P1/P2 as the kind needs
  x N v1 .. vN                  fp32 inputs as hex bits (row-major [M][K])
  q N c1 .. cN                  expected codes (hex bytes)
  s N v1 .. vN                  expected scales (hex fp32 bits, or hex bytes
                                for MX e8m0 / NVFP4 e4m3 block scales)
  z N z1 .. zN                  expected zero points (decimal int32)
  end
KINDs: int8s (P1 = scale bits, P2 = "azp:sym"), int8d (P1 = sym), fp8s
(P1 = scale bits), fp8t (dynamic per tensor), fp8k (dynamic per token, P1
= scale_ub bits, 0 = none), fp8g (P1 = group, P2 = ue8m0), mx (P1 = element
format name), nvfp4 (P1 = global_scale_inv bits).
Usage: python3 gen_quant.py > quant.txt
"""
import math
import sys

import ml_dtypes as md
import numpy as np

SEED = 20240611
F32 = np.float32
rng = np.random.default_rng(SEED)


def bits(a):
    return np.asarray(a, dtype=F32).reshape(-1).view(np.uint32)


def f32_from_bits(b):
    return np.array([b], dtype=np.uint32).view(F32)[0]


def hexs(a):
    return " ".join("%08x" % int(b) for b in bits(a))


def bytes_hex(a):
    return " ".join("%02x" % int(v) for v in np.asarray(a).reshape(-1))


# ---- conversions as the kernels do them ---------------------------------

def rni_sat(v, lo, hi):
    """PTX cvt.rni.sat.{s8,s32}.f32: RNE, saturate, NaN -> 0."""
    out = np.zeros(v.shape, dtype=np.int64)
    ok = ~np.isnan(v)
    r = np.rint(v[ok].astype(np.float64))
    out[ok] = np.clip(r, lo, hi).astype(np.int64)
    return out


def wrap32(v):
    return ((v + 2**31) % 2**32) - 2**31


def fp8_conv(v):
    """scaled_fp8_conversion: fmaxf(-448, fminf(v, 448)) then RNE."""
    with np.errstate(all="ignore"):
        r = np.fmax(F32(-448), np.fmin(v.astype(F32), F32(448)))
    return r.astype(md.float8_e4m3fn).view(np.uint8)


ELEM = {  # name: (ml_dtypes type, max, NaN code, mbits, emax)
    "fp4_e2m1": (md.float4_e2m1fn, 6.0, 0x07, 1, 2),
    "fp6_e3m2": (md.float6_e3m2fn, 28.0, 0x1F, 2, 4),
    "fp6_e2m3": (md.float6_e2m3fn, 7.5, 0x1F, 3, 2),
    "fp8_e4m3fn": (md.float8_e4m3fn, 448.0, 0x7F, 3, 8),
}


def elem_codes(name, v):
    """RNE with saturation to +-max; NaN -> the qport/satfinite code."""
    dt, mx, nan_code, _, _ = ELEM[name]
    v = np.asarray(v, dtype=F32)
    nan = np.isnan(v)
    with np.errstate(all="ignore"):
        c = np.clip(np.where(nan, F32(0), v), -mx, mx).astype(dt)
    codes = c.view(np.uint8).astype(np.int64) & (0xFF if name == "fp8_e4m3fn" else (0x3F if "fp6" in name else 0x0F))
    codes[nan] = nan_code
    return codes


# ---- the quantizers, from docs/semantics.md -------------------------------

def int8_static(x, s, azp, sym):
    with np.errstate(all="ignore"):
        if sym:  # docs/semantics.md §12: true division
            return rni_sat(x / s, -128, 127)
        inv = F32(1) / s  # docs/semantics.md §12: multiply by the fp32 reciprocal
        return np.clip(wrap32(rni_sat(x * inv, -2**31, 2**31 - 1) + azp), -128, 127)


def int8_dynamic(x, sym):
    q = np.zeros(x.shape, dtype=np.int64)
    s = np.zeros(x.shape[0], dtype=F32)
    z = np.zeros(x.shape[0], dtype=np.int64)
    with np.errstate(all="ignore"):
        for r, row in enumerate(x):
            if sym:
                amax = np.fmax.reduce(np.abs(row), initial=F32(0))
                s[r] = amax / F32(127)
                inv = F32(0) if amax == 0 else F32(127) / amax
                q[r] = rni_sat(row * inv, -128, 127)
            else:
                mn = np.fmin.reduce(row, initial=F32(np.finfo(F32).max))
                mx = np.fmax.reduce(row, initial=F32(-np.finfo(F32).max))
                sc = (mx - mn) / F32(255)
                zp = int(rni_sat(np.array([F32(-128) - mn / sc]), -2**31, 2**31 - 1)[0])
                inv = F32(1) / sc
                s[r], z[r] = sc, zp
                q[r] = np.clip(wrap32(rni_sat(row * inv, -2**31, 2**31 - 1) + zp), -128, 127)
    return q, s, z


def fp8_static(x, s):
    with np.errstate(all="ignore"):
        return fp8_conv(x * (F32(1) / s))


def fp8_dyn_tensor(x):
    with np.errstate(all="ignore"):
        s = np.fmax.reduce(np.abs(x).reshape(-1), initial=F32(0)) / F32(448)  # no minimum (docs/semantics.md §13)
        return fp8_conv(x * (F32(1) / s)), np.array([s], dtype=F32)


def fp8_dyn_token(x, ub):
    min_s = F32(1) / F32(448 * 512)
    q = np.zeros(x.shape, dtype=np.uint8)
    s = np.zeros(x.shape[0], dtype=F32)
    with np.errstate(all="ignore"):
        for r, row in enumerate(x):
            a = np.fmax.reduce(np.abs(row), initial=F32(0))
            if ub > 0:
                a = np.fmin(a, ub)
            s[r] = np.fmax(a / F32(448), min_s)
            q[r] = fp8_conv(row / s[r])  # division (docs/semantics.md §12)
    return q, s


def ue8m0_ceil(s):
    """2^ceil(log2(max(|s|, 1e-10))), exact via frexp."""
    a = max(abs(float(s)), float(F32(1e-10)))
    if math.isinf(a):  # an infinite group max: the bit form keeps inf
        return F32(np.inf)
    m, e = math.frexp(a)  # a = m * 2^e, m in [0.5, 1)
    return F32(math.ldexp(1.0, e - 1 if m == 0.5 else e))


def fp8_group(x, g, ue8m0):
    m, k = x.shape
    q = np.zeros(x.shape, dtype=np.uint8)
    s = np.zeros((m, k // g), dtype=F32)
    with np.errstate(all="ignore"):
        for r in range(m):
            for j in range(k // g):
                blk = x[r, j * g:(j + 1) * g]
                a = np.fmax(F32(1e-10), np.fmax.reduce(np.abs(blk), initial=F32(0)))
                sc = a / F32(448)
                if ue8m0:
                    sc = ue8m0_ceil(sc)
                s[r, j] = sc
                q[r, j * g:(j + 1) * g] = fp8_conv(blk * (F32(1) / sc) if ue8m0 else blk / sc)
    return q, s


def even_scale(name, amax):
    """Quark even_round (docs/semantics.md §6) in fp32: round the mantissa of A half-up
    to mbits, drop it, e = floor(log2) - emax clamped to [-127, 127]."""
    _, _, _, mbits, emax = ELEM[name]
    a = abs(float(amax))
    if math.isnan(a):
        return 255
    if a == 0.0:
        a = 2.0 ** -126
    if math.isinf(a):
        e = 127
    else:
        f, E = math.frexp(a)  # a = f * 2^E, f in [0.5, 1)
        mant = f * 2.0        # [1, 2)
        rounded = math.floor(mant * 2**mbits + 0.5) / 2**mbits
        p = E - 1 + (1 if rounded >= 2.0 else 0)
        if p >= 128:          # the fp32 pattern carried into inf
            e = 127
        else:
            e = max(-127, min(127, p - emax))
    return e + 127


def mx_quant(x, name):
    m, k = x.shape
    q = np.zeros(x.shape, dtype=np.int64)
    s = np.zeros((m, k // 32), dtype=np.int64)
    for r in range(m):
        for j in range(k // 32):
            blk = x[r, j * 32:(j + 1) * 32]
            # torch amax: a NaN anywhere makes the block max NaN
            a = F32(np.nan) if np.isnan(blk).any() else np.max(np.abs(blk))
            code = even_scale(name, a)
            s[r, j] = code
            if code == 255:
                q[r, j * 32:(j + 1) * 32] = ELEM[name][2]
            else:
                with np.errstate(all="ignore"):
                    v = blk * F32(2.0 ** (127 - code))  # exact power of two in fp32
                q[r, j * 32:(j + 1) * 32] = elem_codes(name, v)
    return q, s


def nvfp4_quant(x, g):
    m, k = x.shape
    q = np.zeros(x.shape, dtype=np.int64)
    s = np.zeros((m, k // 16), dtype=np.int64)
    inv6, inv_g = F32(1) / F32(6), F32(1) / g
    with np.errstate(all="ignore"):
        for r in range(m):
            for j in range(k // 16):
                blk = x[r, j * 16:(j + 1) * 16]
                vmax = np.fmax.reduce(np.abs(blk), initial=F32(0))  # __hmax2 keeps the non-NaN
                sf = g * (vmax * inv6)
                code = int(fp8_conv(np.array([sf], dtype=F32))[0])
                s[r, j] = code
                sf_f = F32(np.array([code], dtype=np.uint8).view(md.float8_e4m3fn).astype(F32)[0])
                out_scale = F32(0) if sf_f == 0 else F32(1) / (sf_f * inv_g)
                q[r, j * 16:(j + 1) * 16] = elem_codes("fp4_e2m1", blk * out_scale)
    return q, s


# ---- inputs --------------------------------------------------------------

def normal(m, k, scale=1.0):
    return (rng.standard_normal((m, k)) * scale).astype(F32)


def specials(k):
    """One row each: zeros, constant, huge, tiny, NaN, +inf, -inf, mixed."""
    rows = []
    rows.append(np.zeros(k, dtype=F32))
    rows.append(np.full(k, 0.75, dtype=F32))
    rows.append((rng.standard_normal(k) * 1e30).astype(F32))
    huge = (rng.standard_normal(k)).astype(F32)
    huge[3] = F32(3.3e38)
    rows.append(huge)
    rows.append((rng.standard_normal(k) * 1e-30).astype(F32))
    tiny = (rng.standard_normal(k) * 1e-39).astype(F32)  # fp32 subnormals
    rows.append(tiny)
    for special in (np.nan, np.inf, -np.inf):
        r = rng.standard_normal(k).astype(F32)
        r[1] = F32(special)
        rows.append(r)
    r = rng.standard_normal(k).astype(F32)
    r[0] = F32(-0.0)
    rows.append(r)
    return np.stack(rows)


def emit(out, kind, name, x, p1="0", p2="0", q=None, s=None, s_bytes=False, z=None):
    m, k = x.shape
    out.append("case %s %s %d %d %s %s" % (kind, name, m, k, p1, p2))
    out.append("x %d %s" % (x.size, hexs(x)))
    if q is not None:
        out.append("q %d %s" % (np.asarray(q).size, bytes_hex(np.asarray(q).astype(np.int64) & 0xFF)))
    if s is not None:
        s = np.asarray(s)
        out.append("s %d %s" % (s.size, bytes_hex(s) if s_bytes else hexs(s)))
    if z is not None:
        out.append("z %d %s" % (np.asarray(z).size, " ".join(str(int(v)) for v in np.asarray(z).reshape(-1))))
    out.append("end")


def main():
    out = ["# qport activation-quantizer golden vectors, generated by gen_quant.py",
           "# ml_dtypes %s numpy %s seed %d" % (md.__version__, np.__version__, SEED),
           "# See gen_quant.py for where the spec overrides numpy / ml_dtypes."]
    sets = [("normal", normal(3, 64)), ("wide", normal(2, 256, 40.0)), ("specials", specials(64))]
    for sname, x in sets:
        for sc in (F32(0.05), F32(3.1e-3)):
            emit(out, "int8s", sname, x, "%08x" % bits(sc)[0], "0:1", q=int8_static(x, sc, 0, True))
            emit(out, "int8s", sname, x, "%08x" % bits(sc)[0], "-7:0", q=int8_static(x, sc, -7, False))
        for sym in (1, 0):
            q, s, z = int8_dynamic(x, sym)
            emit(out, "int8d", sname, x, str(sym), "0", q=q, s=s, z=None if sym else z)
        emit(out, "fp8s", sname, x, "%08x" % bits(F32(0.0123))[0], q=fp8_static(x, F32(0.0123)))
        q, s = fp8_dyn_tensor(x)
        emit(out, "fp8t", sname, x, q=q, s=s)
        for ub in (F32(0), F32(1.5)):
            q, s = fp8_dyn_token(x, ub)
            emit(out, "fp8k", sname, x, "%08x" % bits(ub)[0], q=q, s=s)
        for ue in (0, 1):
            if x.shape[1] % 128 == 0:
                q, s = fp8_group(x, 128, ue)
                emit(out, "fp8g", sname, x, "128", str(ue), q=q, s=s)
            q, s = fp8_group(x, 32, ue)
            emit(out, "fp8g", sname, x, "32", str(ue), q=q, s=s)
        for el in ELEM:
            q, s = mx_quant(x, el)
            emit(out, "mx", sname, x, el, q=q, s=s, s_bytes=True)
        for g in (F32(448 * 6 / 3.0), F32(1.0), F32(2688.0 / 1e30)):
            q, s = nvfp4_quant(x, g)
            emit(out, "nvfp4", sname, x, "%08x" % bits(g)[0], q=q, s=s, s_bytes=True)
    # Ties of the MX element rounding and the even rule's thresholds: a
    # block whose max is 1.75*2^n (fp4 rounds the scale up) and elements
    # on every half step of the fp4 grid.
    t = np.zeros((2, 32), dtype=F32)
    t[0, :16] = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -0.75, -2.5, -5.0, 0.1, 4.0, 6.0, 1.0, 0.5]) / 4
    t[0, 16] = 1.5
    t[1, :] = np.linspace(-7, 7, 32, dtype=F32)
    t[1, 0] = 1.75 * 8
    for el in ELEM:
        q, s = mx_quant(t, el)
        emit(out, "mx", "ties", t, el, q=q, s=s, s_bytes=True)
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
