// Float-weight layers: W4A16, OCP-MX, W4A8-MXFP4-FP8, NVFP4 and
// unquantized weights, dequantized in registers to the exact fp32 value of
// the reference's weight (vk_linear.c writes the layouts):
//   the row of output feature n is Kw/32 chunks of 32 weights (Kw = K
//   rounded up to 32, the padding codes 0); part j (0..3) of chunk c holds
//   k = 32c + 8j + b, b = 0..7:
//   WF_W4   4-bit codes, 4 words a chunk, nibble b of word j; weight
//           (u - z) * s, s = ws[g][n], z = azp[g][n], g = k / gsz (exact);
//   WF_NIB  fp4 codes in the same nibbles; WF_BYTE one code a byte, 8 words
//           a chunk (word 2j + b/4, byte b%4): weight rnd(lut[code] * bs)
//           with lut = azp (fp32 bits, 256 entries), bs = ws[n][k / blk]
//           (Kw / blk per row), one fp32 multiply, RNE to the act dtype
//           (api/backend.h: exactly the reference's dequantized weight);
//   WF_HALF act-dtype bits, 16 words a chunk (word 4j + b/2, half b%2).
// The group size (WF_W4) or block size (LUT formats) rides in pc.input_zp.
// Needs WFMT, bindings 3-5 (w, ws, azp of vk_epilogue.glsl).
#ifndef VK_WDEQ_GLSL
#define VK_WDEQ_GLSL
#define WF_W4 0u
#define WF_NIB 1u
#define WF_BYTE 2u
#define WF_HALF 3u
layout(constant_id = 7) const uint WFMT = 0;

uint wf_words() { return WFMT == WF_HALF ? 16u : WFMT == WF_BYTE ? 8u : 4u; }

// The code table, copied into shared memory by wf_lut_load (LUT formats).
shared float slut[256];
void wf_lut_load(uint t, uint nthreads) {
    if (WFMT == WF_NIB || WFMT == WF_BYTE)
        for (uint i = t; i < 256u; i += nthreads) slut[i] = intBitsToFloat(azp[i]);
    barrier();
}

float lut_deq(uint code, float bs) {
    precise float p = slut[code] * bs;
    return act_to_f32(f32_to_act(p, IS_BF16), IS_BF16);
}

// The 8 weights k = 32c + 8j + b of local row nl (global column n).
void wpart(uint nl, uint n, uint c, uint j, uint Kc, out float v[8]) {
    uint base = (nl * Kc + c) * wf_words();
    uint gb = uint(pc.input_zp);
    if (WFMT == WF_W4) {
        uint word = w[base + j];
        uint gi = ((32u * c) / gb) * pc.N + n;
        float s = ws[gi];
        int z = azp[gi];
        [[unroll]] for (uint b = 0u; b < 8u; b++) v[b] = float(int(bitfieldExtract(word, int(4u * b), 4)) - z) * s;
    } else if (WFMT == WF_NIB) {
        uint word = w[base + j];
        float bs = ws[n * (pc.Kw / gb) + (32u * c + 8u * j) / gb];
        [[unroll]] for (uint b = 0u; b < 8u; b++) v[b] = lut_deq(bitfieldExtract(word, int(4u * b), 4), bs);
    } else if (WFMT == WF_BYTE) {
        float bs = ws[n * (pc.Kw / gb) + (32u * c + 8u * j) / gb];
        [[unroll]] for (uint h = 0u; h < 2u; h++) {
            uint word = w[base + 2u * j + h];
            [[unroll]] for (uint b = 0u; b < 4u; b++) v[4u * h + b] = lut_deq(bitfieldExtract(word, int(8u * b), 8), bs);
        }
    } else {
        [[unroll]] for (uint h = 0u; h < 4u; h++) {
            uint word = w[base + 4u * j + h];
            v[2u * h] = act_to_f32(word & 0xFFFFu, IS_BF16);
            v[2u * h + 1u] = act_to_f32(word >> 16, IS_BF16);
        }
    }
}

#ifndef WDEQ_NO_STORE // the MoE GEMM (vk_moe_gemm.comp) has its own epilogue
// y = rnd(acc + bias) (fp32 add), or with BIAS_AFTER rnd(rnd(acc) + bias)
// (NVFP4: the reference adds the rounded product and the bias in fp32).
void store_wf(uint m, uint n, float acc) {
    uint o;
    if (BIAS_AFTER) {
        o = f32_to_act(acc, IS_BF16);
        if (HAS_BIAS) {
            precise float s = act_to_f32(o, IS_BF16) + act_to_f32(uint(bias[n]), IS_BF16);
            o = f32_to_act(s, IS_BF16);
        }
    } else {
        precise float v = HAS_BIAS ? acc + act_to_f32(uint(bias[n]), IS_BF16) : acc;
        o = f32_to_act(v, IS_BF16);
    }
    y[m * pc.N + n] = uint16_t(o);
}
#endif
#endif
