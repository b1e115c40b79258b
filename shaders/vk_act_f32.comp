#version 450
#extension GL_GOOGLE_include_directive : require
// W4A16: fp16/bf16 activations widened to fp32 (exact) once per forward,
// rows [M][Kw] (Kw = K rounded up to 32), the padding zero, so the GEMV
// reads each row as whole 32-weight chunks. One work-group per row.
#include "vk_layout.glsl"
#include "vk_common.glsl"

layout(constant_id = 0) const uint WG = 64;
layout(local_size_x_id = 0) in;

layout(std430, binding = 0) readonly buffer X { uint16_t x[]; };
layout(std430, binding = 1) writeonly buffer XF { float xf[]; };

void main() {
    uint m = gl_WorkGroupID.x;
    for (uint k = gl_LocalInvocationID.x; k < pc.Kw; k += WG)
        xf[m * pc.Kw + k] = k < pc.K ? act_to_f32(uint(x[m * pc.K + k]), IS_BF16) : 0.0;
}
