/* libFuzzer target: any bytes as a safetensors file; every tensor handed
 * out is read in full, so an unchecked offset is an ASan report. */
#include <stddef.h>
#include <stdint.h>

#include "qport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static qp_context *ctx;
    if (!ctx && qp_context_create(&ctx) != QP_OK) return 0;
    qp_safetensors *f;
    if (qp_safetensors_open_buffer(ctx, "fuzz.safetensors", data, size, &f) != QP_OK) return 0;
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < qp_safetensors_count(f); i++) {
        qp_tensor t;
        if (qp_safetensors_get(f, i, &t, NULL) != QP_OK) continue;
        size_t n = 1, esz = 1;
        for (int d = 0; d < t.ndim; d++) n *= (size_t)t.shape[d];
        if (qp_format_bits(t.dtype) >= 8) esz = (size_t)qp_format_bits(t.dtype) / 8;
        for (size_t b = 0; b < n * esz && t.dtype != QP_DTYPE_NONE; b++) sink ^= ((const uint8_t *)t.data)[b];
    }
    (void)sink;
    (void)qp_safetensors_metadata(f, "format");
    qp_safetensors_close(f);
    return 0;
}
