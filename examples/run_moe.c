/* An MoE block of a model directory on the cpu reference: bind the routed
 * experts as vLLM's FusedMoE stacks them, take the routing from config.json,
 * and run the fused MoE on router logits.
 *   cc run_moe.c $(pkg-config --cflags --libs qport) && ./a.out MODEL_DIR */
#include <qport.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 2) return fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]), 2;
    const char *dir = argv[1];
    qp_context *ctx; qp_model *m; qp_moe_binding b; qp_moe_options o; qp_device *cpu; qp_moe *moe;
    if (qp_context_create(&ctx)) return 1;
    if (qp_model_open(ctx, dir, &m) || !qp_model_moe_count(m) ||
        qp_model_bind_moe(m, qp_model_moe_name(m, 0), NULL, &b) || /* w13/w2 stacked as FusedMoE */
        qp_model_moe_options(m, b.layer, &o) ||                  /* top-k, renormalize, ... */
        qp_device_find(ctx, "cpu", &cpu) ||
        qp_moe_create(cpu, &b.scheme, b.E, b.H, b.I, b.tensors, b.n_tensors, &o, &moe))
        return fprintf(stderr, "%s\n", qp_last_error(ctx)), 1;
    enum { M = 3 };
    uint16_t *x = calloc((size_t)M * b.H, 2), *y = calloc((size_t)M * b.H, 2);
    float *logits = calloc((size_t)M * b.E, sizeof(float));
    for (int i = 0; i < M * b.H; i++) x[i] = (uint16_t)qp_format_encode(o.act_dtype, (float)(i % 7) * 0.1f);
    for (int i = 0; i < M * b.E; i++) logits[i] = (float)(i % 5);
    if (qp_moe_forward(moe, x, M, logits, y)) return fprintf(stderr, "%s\n", qp_last_error(ctx)), 1;
    printf("%s: %s, %d experts, top-%d: y[0] = %g\n", b.layer, b.scheme.scheme_class, b.E, o.top_k,
           qp_format_decode(o.act_dtype, y[0]));
    qp_moe_destroy(moe); qp_moe_binding_free(&b); qp_model_close(m); qp_context_destroy(ctx);
    free(x); free(y); free(logits);
    return 0;
}
