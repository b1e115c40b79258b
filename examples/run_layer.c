/* A native app running one quantized layer on the best device qport finds,
 * checked against the cpu reference:
 *   cc run_layer.c $(pkg-config --cflags --libs qport) -lm
 *   ./a.out config.json model.layers.0.mlp.down_proj      (N = K = 256) */
#include <math.h>
#include <qport.h>
#include <stdio.h>
#include <stdlib.h>

enum { M = 4, N = 256, K = 256 };

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s CONFIG LAYER\n", argv[0]); return 2; }
    qp_context *ctx;
    if (qp_context_create(&ctx) != QP_OK) return 2;
    int rc = 1;
    qp_config *cfg = NULL;
    qp_qweights *qw = NULL;
    qp_linear *lin = NULL, *ref = NULL;
    qp_scheme s;
    qp_device *dev, *cpu;
    static float w[N * K];
    static uint16_t x[M * K], y[M * N], yr[M * N];
    qp_tensor t[8];
    size_t nt;
    for (int i = 0; i < N * K; i++) w[i] = (float)sin(i * 0.37) * 0.05f;      /* weights [N][K] */
    for (int i = 0; i < M * K; i++) x[i] = (uint16_t)qp_format_encode(QP_DTYPE_F16, (float)cos(i * 0.11));
    if (qp_config_load_file(ctx, argv[1], &cfg) || qp_config_resolve(cfg, argv[2], QP_LAYER_LINEAR, NULL, &s) ||
        qp_quantize_weights(ctx, &s, w, N, K, NULL, &qw) || qp_device_pick(ctx, &s, &dev) ||
        qp_device_find(ctx, "cpu", &cpu))
        goto out;
    nt = qp_qweights_count(qw);
    for (size_t i = 0; i < nt && i < 8; i++) qp_qweights_get(qw, i, &t[i]);
    if (qp_linear_create(dev, &s, N, K, t, nt, NULL, &lin) || qp_linear_forward(lin, x, M, y) ||
        qp_linear_create(cpu, &s, N, K, t, nt, NULL, &ref) || qp_linear_forward(ref, x, M, yr))
        goto out;
    qp_device_info di = {.struct_size = sizeof di};
    qp_device_get_info(dev, &di);
    double maxe = 0;
    for (int i = 0; i < M * N; i++)
        maxe = fmax(maxe, fabs(qp_format_decode(QP_DTYPE_F16, y[i]) - qp_format_decode(QP_DTYPE_F16, yr[i])));
    printf("%s on %s:%d (%s): y[0] = %g, max |device - reference| = %g\n", qp_scheme_kind_name(s.kind), di.backend,
           di.index, di.name, qp_format_decode(QP_DTYPE_F16, y[0]), maxe);
    rc = 0;
out:
    if (rc) fprintf(stderr, "%s\n", qp_last_error(ctx));
    qp_linear_destroy(lin);
    qp_linear_destroy(ref);
    qp_qweights_destroy(qw);
    qp_config_destroy(cfg);
    qp_context_destroy(ctx);
    return rc;
}
