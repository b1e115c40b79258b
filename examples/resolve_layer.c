/* A minimal native app: which scheme would vLLM run for one layer?
 *   cc resolve_layer.c $(pkg-config --cflags --libs qport)
 *   ./a.out config.json model.layers.0.self_attn.qkv_proj [capability] */
#include <qport.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s CONFIG LAYER [CAPABILITY]\n", argv[0]);
        return 2;
    }
    qp_context *ctx;
    if (qp_context_create(&ctx) != QP_OK) return 2;
    qp_config *cfg;
    if (qp_config_load_file(ctx, argv[1], &cfg) != QP_OK) {
        fprintf(stderr, "%s\n", qp_last_error(ctx));
        qp_context_destroy(ctx);
        return 2;
    }
    qp_resolve_options opts;
    qp_resolve_options_init(&opts);
    if (argc > 3) opts.capability = atoi(argv[3]);
    qp_scheme s;
    qp_status st = qp_config_resolve(cfg, argv[2], QP_LAYER_LINEAR, &opts, &s);
    if (st == QP_OK)
        printf("%s: %s %s (weight %s, activation %s)\n", argv[2], s.method, s.scheme_class,
               s.weight_key[0] ? s.weight_key : "None", s.activation_key[0] ? s.activation_key : "None");
    else
        printf("%s: %s: %s\n", argv[2], qp_status_exception(st) ? qp_status_exception(st) : qp_status_str(st),
               qp_last_error(ctx));
    qp_config_destroy(cfg);
    qp_context_destroy(ctx);
    return st == QP_OK ? 0 : 1;
}
