// dot4(a, b): the int32 dot product of two words holding 4 signed bytes each.
// USE_DOT=1: OpSDot (SPV_KHR_integer_dot_product) through GL_EXT_spirv_intrinsics,
// because Debian's glslang 12 rejects GL_EXT_integer_dot_product (docs/backends.md).
// OpSDot, not OpSDotAccSat: the accumulation must wrap like the reference's
// int32 sum, never saturate. USE_DOT=0: the plain int32 multiply-add.
#ifndef VK_DOT_GLSL
#define VK_DOT_GLSL
#if USE_DOT
#extension GL_EXT_spirv_intrinsics : require
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4x8(uint a, uint b, spirv_literal int fmt);
int dot4(uint a, uint b) { return sdot4x8(a, b, 0); }
#else
int dot4(uint a, uint b) {
    ivec4 x = ivec4(bitfieldExtract(int(a), 0, 8), bitfieldExtract(int(a), 8, 8),
                    bitfieldExtract(int(a), 16, 8), bitfieldExtract(int(a), 24, 8));
    ivec4 y = ivec4(bitfieldExtract(int(b), 0, 8), bitfieldExtract(int(b), 8, 8),
                    bitfieldExtract(int(b), 16, 8), bitfieldExtract(int(b), 24, 8));
    return x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;
}
#endif
int dot16(uvec4 a, uvec4 b) { return dot4(a.x, b.x) + dot4(a.y, b.y) + dot4(a.z, b.z) + dot4(a.w, b.w); }

// QQQ's packed int4 weights (vk_linear.c): one word holds k = 8j..8j+3 in the
// low nibbles of its bytes and k = 8j+4..8j+7 in the high nibbles.
// Per-channel, the int8 weight is 16 * q4 (docs/semantics.md §11 step 2): the nibble moved
// to the high half of its byte. Grouped, a 16-byte table per (column, group)
// maps the code to the exact int8 weight (wrap included).
uint w4_channel(uint w, bool hi) { return hi ? (w & 0xF0F0F0F0u) : ((w & 0x0F0F0F0Fu) << 4); }
uint lut_byte(uvec4 L, uint c) {
    uint v = c < 8u ? (c < 4u ? L.x : L.y) : (c < 12u ? L.z : L.w);
    return (v >> ((c & 3u) * 8u)) & 0xFFu;
}
uint w4_group(uint w, bool hi, uvec4 L) {
    uint s = hi ? 4u : 0u;
    return lut_byte(L, (w >> s) & 15u) | (lut_byte(L, (w >> (8u + s)) & 15u) << 8) |
           (lut_byte(L, (w >> (16u + s)) & 15u) << 16) | (lut_byte(L, (w >> (24u + s)) & 15u) << 24);
}
#endif
