/* vk-linear: W8A8-INT8 (4 activation modes x fp16/bf16 x 5 (K, N) shapes
 * around the tile and word edges, bias and per-tensor / per-channel
 * weights alternating) and QQQ (group -1 / 128 x 3 shapes, bias on / off,
 * group scales that make the int8 weight wrap) bit for bit on the device's
 * paths (GEMV / tiled x int-dot / plain) and every M; W8A8-FP8 (3 modes x
 * fp16 / bf16) on GEMV and tiled within the fp32-accumulation bound, plus
 * an identity weight per mode compared bit for bit. */
#include <stdio.h>

#include "vk_tests.h"

int main(void) {
    int rc = vk_open("vk-linear");
    if (rc) return rc == 77 ? 77 : bh_finish();
    static const int shapes[][2] = {{16, 64}, {31, 67}, {128, 128}, {300, 129}, {513, 33}}; /* K, N */
    const int ns = (int)(sizeof shapes / sizeof shapes[0]);
    int variant = 0;
    if (bh_group("int8"))
        for (int dt = 0; dt < 2; dt++)
            for (int mode = 0; mode < 4; mode++)
                for (int s = 0; s < ns; s++, variant++)
                    vk_int8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, mode < 2, (mode & 1) == 0, variant % 2 == 0,
                            variant % 3 != 1, shapes[s][0], shapes[s][1], vk_ip, vk_nip, vk_Ms, VK_NM);
    static const int qshapes[][2] = {{128, 64}, {256, 192}, {384, 128}};
    if (bh_group("qqq"))
        for (int g = 0; g < 2; g++)
            for (int s = 0; s < 3; s++) vk_qqq(g ? 128 : -1, s != 1, qshapes[s][0], qshapes[s][1], vk_ip, vk_nip);
    static const unsigned fpaths[] = {QP_PATH_GEMV, QP_PATH_TILED};
    static const qp_act_mode facts[] = {QP_ACT_FP8_STATIC, QP_ACT_FP8_DYNAMIC_TENSOR, QP_ACT_FP8_DYNAMIC_TOKEN};
    variant = 0;
    if (bh_group("fp8"))
        for (int dt = 0; dt < 2; dt++)
            for (int a = 0; a < 3; a++) {
                vk_fp8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, facts[a], a != 1, 72, 72, true, fpaths, 2);
                for (int s = 0; s < ns; s += 2, variant++)
                    vk_fp8(dt ? QP_DTYPE_BF16 : QP_DTYPE_F16, facts[a], variant % 2 == 0, shapes[s][0], shapes[s][1],
                           false, fpaths, 2);
            }
    return vk_close();
}
