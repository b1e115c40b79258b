/* The qport command: one subcommand per job. */
#include <stdio.h>
#include <string.h>

#include "tool.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: qport <command> [options]\n"
            "\n"
            "commands:\n"
            "  inspect CONFIG [--layer NAME[:linear|attention|moe]]... [--packed FUSED=SHARD,...]...\n"
            "          [--capability CC] [--dialect vllm|sglang] [--json]\n"
            "      resolve a quantization config the way vLLM does\n"
            "  bench-resolve CONFIG|--synthetic [--layers N]\n"
            "      time scheme resolution over many layer names\n"
            "  devices [--json]\n"
            "      list every device, its capabilities and which schemes run on it\n"
            "  conform [--device SPEC]... [--scheme NAME]... [--quick|--full] [--seed N] [--json FILE] [--csv FILE]\n"
            "      run every scheme on every device against the cpu reference\n"
            "  bench [--device SPEC]... [--scheme NAME]... [--shapes decode|prefill|all] [--reps N] [--json FILE]\n"
            "      time each scheme's layer on real sizes: bandwidth, arithmetic rate, their ratios to the\n"
            "      device's limits and the speedup over fp16 (qport bench --help for every option)\n"
            "  demo-model OUT_DIR [--hidden N] [--intermediate N] [--layers N] [--seed N]\n"
            "      write a small Llama-style fp16 model with deterministic random weights\n"
            "  quantize IN_DIR OUT_DIR --scheme NAME [--group-size G]\n"
            "      quantize every linear layer into a checkpoint vLLM's loaders accept\n"
            "  run MODEL_DIR [--layer NAME]... [--device SPEC]... [--tokens M] [--input F] [--output F]\n"
            "      run the model's layers on every device and compare with the cpu reference\n"
            "  version\n");
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "demo-model")) return cmd_demo_model(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "devices")) return cmd_devices(argc - 1, argv + 1);
    if (!strcmp(cmd, "conform")) return cmd_conform(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench-resolve")) return cmd_bench_resolve(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("qport %s\n", qp_version()); return 0; }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) { usage(stdout); return 0; }
    fprintf(stderr, "qport: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
