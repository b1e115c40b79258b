#!/usr/bin/env python3
"""Golden vectors for qport's weight quantizer, qp_quantize_weights.

Independent evidence: every rule is re-derived here with numpy float32
arithmetic (IEEE, correctly rounded per op), numpy float16 and ml_dtypes
casts, from docs/semantics.md and qport.h's documented choices;
tests/test_qweights_golden.c runs qp_quantize_weights on the same inputs and
compares every tensor (name, dtype, shape, bytes) bit for bit. The element
quantizers of the activation goldens (gen_quant.py: MX with Quark's even
scale, NVFP4 blocks, the fp8 conversion) are reused.

Fixed by vLLM (docs/semantics.md, followed to the letter):
  - QQQ per-channel and group-128 quantization (§9: fp16 tensors, fp32
    reciprocals of Python scalars), the
    Marlin-QQQ layout and scale permutations (§10, written here after
    vLLM's marlin_permute_weights / get_qqq_*_perms, not after qport's
    loops);
  - Quark int4 packing order/reorder (§17), fp4 pairs and fp6 quads (§5);
  - the MX shared scale (Quark "even", §6) and element rounding (§6);
    NVFP4 block scales and codes given the global scale (§8);
  - checkpoint names, dtypes and shapes (§5, §8, §9, §15-§17).
Not fixed by vLLM (Quark's calibration is out of its scope); the
generator mirrors qport's documented rule (qport.h, docs/numerics.md):
  - int8 / fp8 weight scale = max|w| of its block / 127 or / 448 (per
    tensor, channel, or 128x128 block), codes rne(w / s) saturating;
    kFp8Static128BlockE8M0Sym rounds that scale up to a power of two;
  - W4A16 int4: s = max|w| / 7 in the params dtype, codes in [-8, 7]; uint4:
    s = (max - min) / 15 over a range holding 0, zp = rne(-min / s);
  - NVFP4 weight_scale_2 = max|w| / (448*6) (>= FLT_MIN; 1 for an all-zero
    weight); input_scale_2 = absmax(x) / (448*6);
  - static input scales: absmax / 127 (int8), absmax / 448 (fp8, W4A8),
    min/max with 0 kept in range and zp = rne(-128 - min/s) (int8 asym),
    from calibration rows or input_absmax (default 1.0);
  - all-zero blocks / columns get zero scales and zero codes (vLLM's QQQ
    reference would divide 0/0 into NaN);
  - int8 weight_zero_point is exported as zeros (vLLM drops it unread).

File format (text; '#' starts a comment):
  case NAME SCHEME N K key=value...   one qp_quantize_weights call
  w N*K B64                           the fp32 weight [N][K]: base64 of its
                                      little-endian bytes; "w same": the
                                      previous case's weight
  c ROWS B64                          optional calibration [ROWS][K], same
  t NAME DTYPE NDIM D0 .. COUNT e1 .. en   an expected tensor: qport dtype
                                      name, shape, elements in hex of the
                                      element width (f32/int32 8 digits,
                                      f16/bf16 4, space separated; byte
                                      dtypes: one hex string, 2 a byte)
  end
SCHEME/keys (see tests/test_qweights_golden.c): int8 gran=tensor|channel
act=dyn|sym|asym; fp8 gran=tensor|channel|block e8m0=0|1 act=dyn|static;
hffp8 act=dyn|static block=0|RxC; w4a16 dtype=int4|uint4 group=G pack=
order|reorder pd=f16|bf16; mx elem=NAME rows=R; w4a8mxfp4; nvfp4; qqq
group=-1|128. absmax=HEX sets input_absmax.
Usage: python3 gen_qweights.py > qweights.txt
"""
import base64
import sys

import ml_dtypes as md
import numpy as np

import gen_quant as gq

SEED = 20261202
F32 = np.float32
FLT_MIN = F32(np.finfo(F32).tiny)
rng = np.random.default_rng(SEED)


def hex_elems(a, width):
    a = np.ascontiguousarray(a).reshape(-1)
    if width == 4:
        v = a.view(np.uint32)
    elif width == 2:
        v = a.view(np.uint16)
    else:  # bytes: one contiguous hex string
        return bytes((a.astype(np.int64) & 0xFF).astype(np.uint8).tolist()).hex()
    return " ".join("%0*x" % (2 * width, int(x)) for x in v)


def b64(a):
    """fp32 array -> base64 of its little-endian bytes (inputs only)."""
    return base64.b64encode(np.ascontiguousarray(a, dtype="<f4").tobytes()).decode()


WIDTH = {"f32": 4, "int32": 4, "f16": 2, "bf16": 2, "int8": 1, "uint8": 1, "fp8_e4m3fn": 1, "e8m0": 1}


class Case:
    def __init__(self, name, scheme, w, keys="", calib=None, absmax=None):
        self.name, self.scheme, self.w, self.keys, self.calib = name, scheme, w.astype(F32), keys, calib
        self.absmax = absmax
        self.tensors = []

    def t(self, name, dtype, shape, data):
        data = np.asarray(data)
        assert int(np.prod(shape)) == data.size, (self.name, name, shape, data.size)
        self.tensors.append((name, dtype, shape, data))

    def text(self, prev):
        n, k = self.w.shape
        keys = self.keys + ((" absmax=%08x" % int(np.array([self.absmax], F32).view(np.uint32)[0])) if self.absmax else "")
        out = ["case %s %s %d %d%s" % (self.name, self.scheme, n, k, (" " + keys.strip()) if keys.strip() else "")]
        if prev is not None and prev.w.shape == self.w.shape and np.array_equal(prev.w.view(np.uint32), self.w.view(np.uint32)):
            out.append("w same")  # the previous case's weight
        else:
            out.append("w %d %s" % (self.w.size, b64(self.w)))
        if self.calib is not None:
            out.append("c %d %s" % (self.calib.shape[0], b64(self.calib)))
        for name, dtype, shape, data in self.tensors:
            out.append("t %s %s %d %s %d %s" % (name, dtype, len(shape), " ".join(str(s) for s in shape), data.size,
                                                hex_elems(data, WIDTH[dtype])))
        out.append("end")
        return "\n".join(out)


# ---- static activation scales (qport's calibration rule) ----------------

def calib_range(c):
    if c.calib is not None:
        lo = min(F32(0), np.min(c.calib).astype(F32))
        hi = max(F32(0), np.max(c.calib).astype(F32))
        return F32(lo), F32(hi)
    a = F32(c.absmax if c.absmax else 1.0)
    return -a, a


def calib_absmax(c):
    lo, hi = calib_range(c)
    return max(-lo, hi)


# ---- 8-bit ----------------------------------------------------------------

def rne_clip(v, lo, hi):
    return np.clip(np.rint(v), lo, hi)


def int8(c, gran, act):
    w = c.w
    n, k = w.shape
    ns = n if gran == "channel" else 1
    q = np.zeros((n, k), dtype=np.int64)
    s = np.zeros(ns, dtype=F32)
    for i in range(ns):
        rows = slice(i, i + 1) if ns > 1 else slice(0, n)
        sc = np.max(np.abs(w[rows])) / F32(127)
        s[i] = sc
        if sc != 0:
            q[rows] = rne_clip(w[rows] / sc, -128, 127)
    c.t("weight", "int8", (n, k), q)
    c.t("weight_scale", "f32", (ns,), s)
    c.t("weight_zero_point", "int8", (ns,), np.zeros(ns, dtype=np.int64))
    if act == "sym":
        c.t("input_scale", "f32", (1,), np.array([calib_absmax(c) / F32(127)], F32))
    elif act == "asym":
        mn, mx = calib_range(c)
        sc = mx / F32(255) - mn / F32(255)
        z = np.clip(np.rint(F32(-128) - mn / sc), -128, 127)
        c.t("input_scale", "f32", (1,), np.array([sc], F32))
        c.t("input_zero_point", "int8", (1,), np.array([z]))


def e8m0_ceil(s):
    """2^ceil(log2 s) as an e8m0 code (0 for s == 0)."""
    if s == 0:
        return 0
    m, e = np.frexp(F32(s))
    e = int(e) - 1 if m == 0.5 else int(e)
    return max(-127, min(127, e)) + 127


def fp8(c, kind, gran, act, e8m0=False, block=(128, 128)):
    """block: the scale block (rows, cols) of gran == "block"."""
    w = c.w
    n, k = w.shape
    blk = gran == "block"
    pc = gran == "channel" and kind == "fp8"
    rb, cb = (block[0], block[1]) if blk else ((1 if pc else n), k)
    nr, nc = -(-n // rb), -(-k // cb)
    q = np.zeros((n, k), dtype=np.uint8)
    s = np.zeros((nr, nc), dtype=np.uint8 if e8m0 else F32)
    for bi in range(nr):
        for bj in range(nc):
            part = w[bi * rb:(bi + 1) * rb, bj * cb:(bj + 1) * cb]
            sc = np.max(np.abs(part)) / F32(448)
            if e8m0:
                code = e8m0_ceil(sc)
                s[bi, bj] = code
                sc = F32(0) if sc == 0 else F32(2.0 ** (code - 127))
            else:
                s[bi, bj] = sc
            if sc != 0:
                q[bi * rb:(bi + 1) * rb, bj * cb:(bj + 1) * cb] = gq.fp8_conv(part / sc)
    c.t("weight", "fp8_e4m3fn", (n, k), q)
    sname = "weight_scale_inv" if blk and kind == "hffp8" else "weight_scale"
    if blk:
        c.t(sname, "e8m0" if e8m0 else "f32", (nr, nc), s)
    else:
        c.t(sname, "f32", (nr,), s.reshape(-1))
    if act == "static":
        c.t("input_scale", "f32", (1,), np.array([calib_absmax(c) / F32(448)], F32))


# ---- W4A16 (docs/semantics.md §17 packing) --------------------------------

PACK_ORDER = {"order": [0, 1, 2, 3, 4, 5, 6, 7], "reorder": [0, 4, 1, 5, 2, 6, 3, 7]}


def pack_int4_quark(codes, method):
    """codes [R][N] 0..15 -> int32 [R][ceil(N/8)]: column 8c+j in nibble P[j]."""
    r, n = codes.shape
    cols = -(-n // 8)
    out = np.zeros((r, cols), dtype=np.uint64)
    for col in range(n):
        cc, j = divmod(col, 8)
        out[:, cc] |= (codes[:, col].astype(np.uint64) & 0xF) << np.uint64(4 * PACK_ORDER[method][j])
    return out.astype(np.uint32).view(np.int32)


def to_params(v, pd):
    """fp32 -> (bits, value) in the params dtype, RNE."""
    if pd == "f16":
        h = np.asarray(v, F32).astype(np.float16)
        return h.view(np.uint16), h.astype(F32)
    b = np.asarray(v, F32).astype(md.bfloat16)
    return b.view(np.uint16), b.astype(F32)


def w4a16(c, dtype, group, pack, pd):
    w = c.w
    n, k = w.shape
    g = k if group <= 0 else group
    G = k // g
    sym = dtype == "int4"
    codes = np.zeros((k, n), dtype=np.int64)
    zc = np.zeros((G, n), dtype=np.int64)
    sbits = np.zeros((G, n), dtype=np.uint16)
    for gi in range(G):
        for col in range(n):
            v = w[col, gi * g:(gi + 1) * g]
            mn, mx = min(F32(0), np.min(v)), max(F32(0), np.max(v))
            # sym: max|w| / 7 (+0 for an all-zero group, whatever the signs of 0)
            raw = F32(np.max(np.abs(v))) / F32(7) if sym else mx / F32(15) - mn / F32(15)
            b, sv = to_params(raw, pd)
            sbits[gi, col] = b
            zp = 0 if sym or sv == 0 else int(np.clip(np.rint(-mn / sv), 0, 15))
            zc[gi, col] = zp
            if sv == 0:
                q = np.full(g, zp)
            else:
                q = np.rint(v / sv) + zp
            q = np.clip(q, -8, 7) if sym else np.clip(q, 0, 15)
            codes[gi * g:(gi + 1) * g, col] = q.astype(np.int64) & 0xF
    c.t("weight", "int32", (k, -(-n // 8)), pack_int4_quark(codes, pack))
    c.t("weight_scale", pd, (G, n), sbits)
    if not sym:
        c.t("weight_zero_point", "int32", (G, -(-n // 8)), pack_int4_quark(zc, pack))


# ---- OCP-MX, W4A8-MXFP4, NVFP4 (docs/semantics.md §5, §6, §7, §8) --------

def pack_fp4(codes):
    codes = codes.reshape(codes.shape[0], -1, 2)
    return (codes[:, :, 0] | (codes[:, :, 1] << 4)).astype(np.uint8)


def pack_fp6(codes):
    v = codes.reshape(codes.shape[0], -1, 4).astype(np.int64)
    word = v[:, :, 0] | (v[:, :, 1] << 6) | (v[:, :, 2] << 12) | (v[:, :, 3] << 18)
    return np.stack([word & 0xFF, (word >> 8) & 0xFF, (word >> 16) & 0xFF], axis=-1).reshape(codes.shape[0], -1)


def mx(c, elem, rows=1, w4a8=False):
    w = c.w
    n, k = w.shape
    if rows == 1:
        codes, s = gq.mx_quant(w, elem)
    else:
        nr = -(-n // rows)
        codes = np.zeros((n, k), dtype=np.int64)
        s = np.zeros((nr, k // 32), dtype=np.int64)
        for rb in range(nr):
            for b in range(k // 32):
                part = w[rb * rows:(rb + 1) * rows, b * 32:(b + 1) * 32]
                code = gq.even_scale(elem, np.max(np.abs(part)))
                s[rb, b] = code
                with np.errstate(all="ignore"):
                    codes[rb * rows:(rb + 1) * rows, b * 32:(b + 1) * 32] = gq.elem_codes(
                        elem, part * F32(2.0 ** (127 - code)))
    if elem == "fp4_e2m1":
        packed = pack_fp4(codes)
    elif elem == "fp8_e4m3fn":
        packed = codes.astype(np.uint8)
    else:
        packed = pack_fp6(codes)
    c.t("weight", "uint8", packed.shape, packed)
    c.t("weight_scale", "uint8", s.shape, s)
    if w4a8:
        c.t("input_scale", "f32", (1,), np.array([calib_absmax(c) / F32(448)], F32))


def nvfp4(c):
    w = c.w
    n, k = w.shape
    amax_x = calib_absmax(c)
    amax = np.max(np.abs(w))
    ws2 = F32(1) if amax == 0 else max(amax / F32(2688), FLT_MIN)
    codes, sf = gq.nvfp4_quant(w, F32(1) / ws2)
    c.t("weight", "uint8", (n, k // 2), pack_fp4(codes))
    c.t("weight_scale", "fp8_e4m3fn", (n, k // 16), sf)
    c.t("weight_scale_2", "f32", (1,), np.array([ws2], F32))
    c.t("input_scale_2", "f32", (1,), np.array([max(amax_x / F32(2688), FLT_MIN)], F32))


# ---- QQQ (docs/semantics.md §9, §10) ---------------------------------

def h(x):
    """An fp16 tensor op: computed in fp32, rounded (RNE) to fp16."""
    with np.errstate(all="ignore"):
        return np.asarray(x, F32).astype(np.float16).astype(F32)


def qqq_quantize(wt, group):
    """wt [K][N] (the transposed Linear weight) -> q [K][N], s_channel [N]
    fp32, s_group [K/128][N] fp16 (natural order)."""
    K, N = wt.shape
    wh = h(wt)
    with np.errstate(all="ignore"):
        if group == -1:
            s = h(np.max(np.abs(wh), axis=0) * (F32(1) / F32(7)))
            q = np.where(s == 0, 0, np.clip(np.rint(h(wh / s)), -7, 7))
            return q.astype(np.int64), h(s * (F32(1) / F32(16))), None
        G = K // 128
        q = np.zeros((K, N), dtype=np.int64)
        sg = np.zeros((G, N), dtype=F32)
        ref_max = np.zeros(N, dtype=F32)
        for g in range(G):
            blk = wh[g * 128:(g + 1) * 128]
            s = h(np.max(np.abs(blk), axis=0) * (F32(2) / F32(15)))
            sg[g] = s
            v = np.where(s == 0, 8, np.clip(np.rint(h(blk / s)) + 8, 0, 15)).astype(F32)
            q[g * 128:(g + 1) * 128] = v.astype(np.int64)
            ref_max = np.maximum(ref_max, np.max(np.abs(h((v - F32(8)) * s)), axis=0))
        s_ch = h(ref_max * (F32(1) / F32(127)))
        s_group = np.where(s_ch == 0, F32(0), h(sg / s_ch)).astype(np.float16)
        return q, s_ch, s_group


def qqq_weight_perm(group):
    """get_qqq_weight_perm (docs/semantics.md §10)."""
    perm = []
    for i in range(32):
        perm1 = []
        col = i // 4
        for block in (0, 1):
            for row in (4 * (i % 4) + r for r in range(4)):
                perm1.append(16 * row + col + 8 * block)
        for j in range(4):
            perm.extend(p + 256 * j for p in perm1)
    perm = np.array(perm)
    interleave = np.array([0, 2, 4, 6, 1, 3, 5, 7] if group == 128 else [4, 0, 5, 1, 6, 2, 7, 3])
    return perm.reshape(-1, 8)[:, interleave].ravel()


def qqq_pack(q, group):
    """marlin_permute_weights + the 8-nibble pack (docs/semantics.md §10)."""
    K, N = q.shape
    t = (q & 0xF).reshape(K // 16, 16, N // 16, 16).transpose(0, 2, 1, 3).reshape(K // 16, N * 16)
    res = t.reshape(-1, 1024)[:, qqq_weight_perm(group)].reshape(t.shape)
    out = np.zeros((res.shape[0], res.shape[1] // 8), dtype=np.uint32)
    for i in range(8):
        out |= res[:, i::8].astype(np.uint32) << np.uint32(4 * i)
    return out.view(np.int32)


def qqq_scale_perms():
    perm = [i + 8 * j for i in range(8) for j in range(8)]
    single = [2 * i + j for i in range(4) for j in (0, 1, 8, 9, 16, 17, 24, 25)]
    return np.array(perm), np.array(single)


def qqq(c, group):
    wt = c.w.T.copy()
    K, N = wt.shape
    q, s_ch, s_group = qqq_quantize(wt, group)
    perm, single = qqq_scale_perms()
    c.t("B", "int32", (K // 16, 2 * N), qqq_pack(q, group))
    c.t("s_channel", "f32", (1, N), s_ch.reshape(-1, 32)[:, single].reshape(1, N))
    if group == 128:
        c.t("s_group", "f16", (K // 128, N), s_group.reshape(-1, 64)[:, perm].reshape(-1, N).view(np.uint16))


# ---- inputs ---------------------------------------------------------------

def weights(n, k, scale=0.05, zero_row=None, zero_block=None):
    """Normal weights with per-row magnitudes, a few outliers, optionally an
    all-zero row (output channel) or [rows, cols] block."""
    w = (rng.standard_normal((n, k)) * scale * (1 + np.arange(n)[:, None] % 5)).astype(F32)
    idx = rng.integers(0, n * k, size=max(1, n * k // 200))
    w.reshape(-1)[idx] *= F32(12)
    if zero_row is not None:
        w[zero_row] = 0
    if zero_block is not None:
        w[zero_block[0], zero_block[1]] = 0
    return w


def tie_row(k, s, halves):
    """A row whose absmax fixes the scale at s (= absmax / qmax) and whose
    other entries are exact rounding ties w / s = m + 1/2."""
    r = np.zeros(k, dtype=F32)
    r[0] = F32(s)
    for i, m in enumerate(halves):
        r[1 + i] = F32(m)
    return r


def main():
    cases = []
    # W8A8-INT8: per channel (one all-zero channel, one row of ties: 63.5
    # makes s = 0.5, 0.25 / 0.5 = 0.5 -> 0, 0.75 -> 2, -1.25 -> -2) and per
    # tensor; static symmetric from input_absmax, asymmetric from calibration
    w = weights(24, 96, zero_row=5)
    w[7] = tie_row(96, 63.5, [0.25, 0.75, 1.25, -0.25, -0.75, -1.25, 31.75, 63.25])
    c = Case("int8_channel_dyn", "int8", w, "gran=channel act=dyn"); int8(c, "channel", "dyn"); cases.append(c)
    c = Case("int8_tensor_sym", "int8", w, "gran=tensor act=sym", absmax=3.0); int8(c, "tensor", "sym"); cases.append(c)
    cal = (rng.standard_normal((3, 96)) * 2 + 0.7).astype(F32)
    c = Case("int8_channel_asym", "int8", w, "gran=channel act=asym", calib=cal); int8(c, "channel", "asym"); cases.append(c)
    # W8A8-FP8: per tensor / channel (ties: 448 makes s = 1; 1.0625 lies
    # between 1 and 1.125 -> 1, 17 between 16 and 18 -> 16, 304 between 288
    # and 320 -> 320), 128x128 blocks with partial edge blocks, e8m0 scales
    w = weights(40, 160, zero_row=3)
    w[9] = tie_row(160, 448.0, [1.0625, 17.0, -17.0, 304.0, 0.0009765625, 0.0029296875])
    c = Case("fp8_tensor_dyn", "fp8", w, "gran=tensor act=dyn"); fp8(c, "fp8", "tensor", "dyn"); cases.append(c)
    c = Case("fp8_channel_static", "fp8", w, "gran=channel act=static", calib=(rng.standard_normal((2, 160)) * 3).astype(F32))
    fp8(c, "fp8", "channel", "static"); cases.append(c)
    c = Case("hffp8_static", "hffp8", w, "act=static block=0", absmax=2.5); fp8(c, "hffp8", "tensor", "static"); cases.append(c)
    # HF fp8 block checkpoints take the config's weight_block_size: 32 x 64
    # here, with partial blocks at the edges (40 rows, 160 columns)
    c = Case("hffp8_block", "hffp8", w, "act=dyn block=32x64"); fp8(c, "hffp8", "block", "dyn", block=(32, 64)); cases.append(c)
    # Quark 128x128 blocks over 130 x 136 (partial edge blocks both ways),
    # the last row block all zero in its first column block
    wb = weights(130, 136, zero_block=(slice(128, 130), slice(0, 128)))
    c = Case("fp8_block", "fp8", wb, "gran=block act=dyn"); fp8(c, "fp8", "block", "dyn"); cases.append(c)
    c = Case("fp8_block_e8m0", "fp8", wb, "gran=block act=dyn e8m0=1"); fp8(c, "fp8", "block", "dyn", e8m0=True); cases.append(c)
    # W4A16: int4 / uint4, order / reorder, groups 32 / 64 / 128 / -1, fp16
    # and bf16 scales; N = 20 leaves a half-empty packed word; one zero group
    w = weights(20, 256, zero_block=(slice(4, 5), slice(64, 96)))
    for dt, g, pk, pd in (("int4", 32, "order", "f16"), ("int4", 128, "reorder", "bf16"), ("int4", -1, "reorder", "f16"),
                          ("uint4", 32, "reorder", "f16"), ("uint4", 64, "order", "bf16"), ("uint4", -1, "order", "f16")):
        c = Case("w4a16_%s_g%d_%s_%s" % (dt, g, pk, pd), "w4a16", w, "dtype=%s group=%d pack=%s pd=%s" % (dt, g, pk, pd))
        w4a16(c, dt, g, pk, pd)
        cases.append(c)
    # MX weights: fp4 (OCP-MX and W4A8-MXFP4-FP8), fp6 e2m3 / e3m2, fp8 with
    # per_block [2, 32] scales; a zero block
    w = weights(16, 128, zero_block=(slice(2, 3), slice(32, 64)))
    for el in ("fp4_e2m1", "fp6_e2m3", "fp6_e3m2", "fp8_e4m3fn"):
        c = Case("mx_%s" % el, "mx", w, "elem=%s rows=1" % el); mx(c, el); cases.append(c)
    c = Case("mx_fp8_rows2", "mx", w, "elem=fp8_e4m3fn rows=2"); mx(c, "fp8_e4m3fn", rows=2); cases.append(c)
    c = Case("w4a8_mxfp4", "w4a8mxfp4", w, "", calib=(rng.standard_normal((2, 128)) * 4).astype(F32))
    mx(c, "fp4_e2m1", w4a8=True); cases.append(c)
    # NVFP4: the global scale from max|w|, blocks of 16
    w = weights(24, 64, zero_block=(slice(1, 2), slice(16, 32)))
    c = Case("nvfp4", "nvfp4", w, "", absmax=5.0); nvfp4(c); cases.append(c)
    c = Case("nvfp4_calib", "nvfp4", (w * F32(1e-3)).astype(F32), "", calib=(rng.standard_normal((2, 64)) * 30).astype(F32))
    nvfp4(c); cases.append(c)
    # QQQ, one weight [64][256] both ways: per channel (an all-zero
    # channel; a row of fp16 ties: max 7 gives s = 1, 0.5 -> 0, 1.5 -> 2,
    # 2.5 -> 2) and group 128 over two groups (one all-zero group, where
    # the tie row's second group gets its own scale)
    w = weights(64, 256, zero_row=10)
    w[11] = tie_row(256, 7.0, [0.5, 1.5, 2.5, -0.5, -2.5, 3.5, 1.0001])
    w[40, :128] = 0
    c = Case("qqq_channel", "qqq", w, "group=-1"); qqq(c, -1); cases.append(c)
    c = Case("qqq_g128", "qqq", w, "group=128"); qqq(c, 128); cases.append(c)
    out = ["# qport weight-quantizer golden vectors, generated by gen_qweights.py",
           "# ml_dtypes %s numpy %s seed %d" % (md.__version__, np.__version__, SEED),
           "# See gen_qweights.py for the rules (spec-fixed vs qport's documented choices)."]
    out.extend(c.text(cases[i - 1] if i else None) for i, c in enumerate(cases))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
