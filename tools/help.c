/* Every subcommand's help in one table: `qport --help` lists the commands,
 * `qport help CMD` and `qport CMD --help` print one entry, and each
 * command's usage error prints the entry's synopsis. tests/test_help_cli.sh
 * checks that each entry names every option its command takes. */
#include <string.h>

#include "tool.h"

typedef struct help_entry {
    const char *name;
    const char *summary;  /* one line for `qport --help`            */
    const char *synopsis; /* the usage lines                        */
    const char *options;  /* one paragraph per argument or option   */
} help_entry;

static const help_entry entries[] = {
    {"inspect", "resolve a quantization config the way vLLM does",
     "usage: qport inspect CONFIG [--layer NAME[:linear|attention|moe]]... [--packed FUSED=SHARD,...]...\n"
     "                     [--capability CC] [--dialect vllm|sglang] [--json]\n",
     "  CONFIG        a HF config.json (its quantization_config is used), a bare quantization_config,\n"
     "                or a QQQ quant_config.json / quantize_config.json\n"
     "  --layer NAME[:KIND]  resolve this layer (repeatable); KIND is linear (default), attention or moe.\n"
     "                Without --layer: a summary of the config (method, global scheme, the model's\n"
     "                architecture and packed modules, the experts of its first MoE layer (none for a\n"
     "                dense model), every layer_quant_config pattern, layer_type_quant_config keys\n"
     "                (vLLM never matches them), excludes, KV cache)\n"
     "  --packed FUSED=SHARD,SHARD...  a packed-modules mapping, as vLLM's model class gives it\n"
     "                (repeatable; e.g. qkv_proj=q_proj,k_proj,v_proj); default: the config's own\n"
     "                packed_modules_mapping, else its architecture's (docs/loading.md), else Llama's\n"
     "  --capability CC  the GPU's compute capability, 89 or 8.9: vLLM's minimum-capability checks\n"
     "                run against it (default: no check)\n"
     "  --dialect vllm|sglang  whose rules to follow (default vllm)\n"
     "  --json        one JSON object per layer and line (layer, kind, result, method, scheme, weight_key,\n"
     "                activation_key, min_capability, error_type, error, formats...)\n"
     "exit status: 0 every layer resolved, 1 some layer is an error, 2 bad usage or unreadable config\n"},
    {"devices", "list every device, its capabilities and which schemes run on it",
     "usage: qport devices [--json]\n",
     "  Lists the backends tried (loaded, or why not), then every device: backend, name, vendor, driver,\n"
     "  kind, memory, UUID, compute capability, capabilities, and for every scheme native, emulated or\n"
     "  unsupported with the reason. Plugins are searched in QPORT_BACKEND_PATH when it is set, else\n"
     "  beside libqport or the program (the installed <libdir>/qport, a build tree's vk/, cl/, cuda/)\n"
     "  and in the install's plugin folder; QPORT_LOG=info logs why a backend has no device.\n"
     "  --json        the same as one JSON document\n"},
    {"conform", "run every scheme on every device against the cpu reference",
     "usage: qport conform [--device SPEC]... [--scheme NAME]... [--quick|--full] [--seed N]\n"
     "                     [--moe|--no-moe] [--json FILE] [--csv FILE] [--verbose] [--list]\n",
     "  --device SPEC  compare this device (repeatable): cpu, vulkan[:N], opencl[:N], cuda[:N] or a\n"
     "                name substring; default every device but the cpu reference\n"
     "  --scheme NAME  only this scheme (repeatable; --list shows the names, MoE ones as moe:NAME);\n"
     "                default all\n"
     "  --moe         only the fused MoE cases (every MoE scheme; E 8/64, k 1/2/8, hot and cold experts,\n"
     "                grouped top-k; fp8-block at H 256/128, I 128); --no-moe: only the linear layers.\n"
     "                Default both\n"
     "  --quick       M in 1..17 and 64, four small layer shapes (the default)\n"
     "  --full        adds M = 512 and the Llama sizes 4096x4096 ... 28672x8192 (long: shows progress\n"
     "                on a terminal)\n"
     "  --seed N      the seed of weights and activations (default 20261202; printed with each failure)\n"
     "  --json FILE   every case (PASS, FAIL, SKIP, errors, reasons) as a JSON array\n"
     "  --csv FILE    every case as CSV\n"
     "  --verbose, -v  one line per case; by default only failing cases and the summary table are printed\n"
     "  --list        print the scheme names and exit\n"
     "  Integer paths must be bit-exact, float paths within the bound of tools/cases.c (docs/conformance.md);\n"
     "  MoE: int8 bit-exact, float within the bound of tools/cases_moe.c around an fp64 model.\n"
     "exit status: 0 all compared cases passed, 1 a case failed, 2 bad usage\n"},
    {"bench", "time each scheme's layer on real sizes against fp16 and the device's limits",
     "usage: qport bench [--device SPEC]... [--scheme NAME]... [--shapes decode|prefill|all|tiny]\n"
     "                   [--size KxN]... [--reps N] [--warmup N] [--max-seconds S] [--rotate-mib N]\n"
     "                   [--jobs N] [--seed N] [--json FILE] [--list]\n"
     "       qport bench --moe [--moe-model tiny|mixtral-8x7b|deepseek-v3] [--device SPEC]...\n"
     "                   [--scheme NAME]... [--shapes decode|prefill|all] [--reps N]\n"
     "       qport bench --chain L [--size KxK] [--scheme NAME] [--device SPEC]... [--reps N]\n"
     "       mpirun -n N qport bench MODEL_DIR --tp-size N|--ep-size N [--device SPEC]... [--reps R] ...\n",
     "  --device SPEC  time this device (repeatable); default every device but the cpu reference,\n"
     "             which runs only when it is the only one or named\n"
     "  --scheme NAME  only this scheme (repeatable; --list shows them); fp16, the baseline, always runs\n"
     "  --shapes   decode: M = 1, 4, 16; prefill: M = 128, 512, 2048; all (default): both;\n"
     "             tiny: one 256x128 layer, M = 1, 4, 32 (tests: 5 reps, 1 warm-up, 5 s cap,\n"
     "             1 MiB rotation, at most 2 layer copies)\n"
     "  --size     layer size K x N (in x out), repeatable; default 4096x4096, 4096x14336,\n"
     "             14336x4096, 8192x28672 (Llama-3 8B and 70B)\n"
     "  --reps     timed runs per case (20)\n"
     "  --warmup   warm-up runs (3, and at least one per layer copy and buffer)\n"
     "  --max-seconds  per-case time cap (20): fewer runs, or SKIP when one run is predicted longer\n"
     "  --rotate-mib   bytes of weights the timed runs cycle through so caches do not flatter\n"
     "             (256): layer copies while cheap to prepare, else a device copy flushes caches\n"
     "  --jobs     threads quantizing the weights (default: the CPU count, at most 8)\n"
     "  --seed N   the seed of the random weights and activations (default 20261202)\n"
     "  --json FILE  every figure of every case, the baselines and the per-scheme means\n"
     "  --list     print the schemes and exit\n"
     "  On a terminal, progress (cases done/total, time left) is shown on stderr.\n"
     "  --moe      the fused MoE layer instead (every MoE scheme, every device; fp16 MoE the\n"
     "             speedup basis; GB/s over the bytes of the experts the tokens select; M = 1, 8, 16\n"
     "             (decode) and 128, 512 (prefill); host-timed)\n"
     "  --tp-size N, --ep-size N  across the N ranks of an MPI job: qport run's parallel mode on\n"
     "             MODEL_DIR with --reps 20 (unless given): per layer the median time and the share of\n"
     "             it spent in the collectives (docs/parallel.md); qport run's options apply\n"
     "  --chain L  L layers (default 32) of one shape (--size, default 4096x4096; K = N) and scheme\n"
     "             (--scheme, default int8-dyn-sym) enqueued back to back at M = 1, 4, 16 with one wait\n"
     "             at the end, and again with a wait per layer: ms per layer of the device timers\n"
     "             (device), of the chain (chained) and with waits (waited), and the ratios\n"
     "             chained/device and waited/chained (--reps runs, 5 by default)\n"
     "  --moe-model  tiny (default: E 8, H 256, I 128, top-2), mixtral-8x7b (E 8, H 4096, I 14336,\n"
     "             top-2), deepseek-v3 (H 7168, I 2048, top-8 grouped over 256 experts; the 32 one\n"
     "             rank of EP-8 holds)\n"
     "exit status: 0 no case failed (SKIPs allowed), 1 a case failed, 2 bad usage\n"},
    {"bench-resolve", "time scheme resolution over many layer names",
     "usage: qport bench-resolve [CONFIG|--synthetic] [--layers N]\n",
     "  CONFIG        the config to resolve against\n"
     "  --synthetic   a generated config with 3,000 excludes and 300 patterns (the default)\n"
     "  --layers N    model layers to name (default 60; each: 256 experts x 3 projections and 5\n"
     "                attention names)\n"
     "  Prints the load time and the names resolved per second.\n"},
    {"demo-model", "write a small Llama-style fp16 model with deterministic random weights",
     "usage: qport demo-model OUT_DIR [--hidden N] [--intermediate N] [--layers N] [--seed N]\n"
     "                        [--experts E [--topk K]] [--force]\n",
     "  OUT_DIR          the folder to write config.json and model.safetensors to (created); a\n"
     "                   folder that already holds either is refused (exit 1) unless --force\n"
     "  --force          overwrite the config.json and model.safetensors already in OUT_DIR\n"
     "  --hidden N       hidden size (512; a multiple of 64)\n"
     "  --intermediate N MLP size (1408; with --experts each expert's, 256)\n"
     "  --experts E      a mixture-of-experts model (Qwen3-MoE layout: mlp.gate routes each token to\n"
     "                   K of the E experts mlp.experts.N.{gate,up,down}_proj; 1..256)\n"
     "  --topk K         experts per token (num_experts_per_tok, 2; norm_topk_prob true)\n"
     "  --layers N       decoder layers (2; at most 64)\n"
     "  --seed N         seed of the N(0, 1/sqrt(K)) weights (20261202)\n"},
    {"quantize", "quantize every linear layer into a checkpoint vLLM's loaders accept",
     "usage: qport quantize IN_DIR OUT_DIR --scheme NAME [--group-size G] [--kv-cache]\n",
     "  IN_DIR        an fp16/bf16/fp32 model folder (config.json and safetensors)\n"
     "  OUT_DIR       where config.json (with the scheme's quantization_config) and model.safetensors\n"
     "                go; other tensors (embeddings, norms, lm_head) are copied unchanged\n"
     "  --scheme NAME  the scheme, as its exporter writes it (the list is printed on a usage error):\n"
     "                int8-{dyn,static}-{sym,asym}, fp8-static, fp8-dyn-tensor, fp8-dyn-token,\n"
     "                fp8-block, w4a16-int4, w4a16-uint4, w4a16-uint4-g64, mxfp4, mxfp4-a-mxfp4, mxfp8,\n"
     "                mxfp6-e3m2, mxfp6-e2m3, w4a8-mxfp4-fp8, nvfp4, qqq, qqq-channel, hf-fp8, hf-fp8-static;\n"
     "                llm-compressor's compressed-tensors layout: ct-w8a8-int8, ct-fp8, ct-fp8-dynamic,\n"
     "                ct-fp8-block, ct-w4a16, ct-w4a16-asym, ct-nvfp4\n"
     "  --group-size G  the group size of a grouped scheme (default: its config's 128; a scheme\n"
     "                without groups refuses it)\n"
     "  --kv-cache    Quark schemes: also an fp8 KV cache (kv_cache_group, k/v_proj output_scale)\n"
     "  On a terminal, progress (tensors done/total, time left) is shown on stderr.\n"},
    {"run", "run a model's layers on every device and compare with the cpu reference",
     "usage: qport run MODEL_DIR [--layer NAME]... [--device SPEC]... [--tokens M] [--seed N]\n"
     "                 [--input FILE.safetensors] [--output FILE.safetensors] [--tp-size N --tp-rank R]\n"
     "                 [--dtype auto|float16|bfloat16|float32] [--ep-size N --ep-rank R]\n"
     "       mpirun -n N qport run MODEL_DIR --tp-size N|--ep-size N [--comm mpi|nccl|auto] [--device SPEC]...\n"
     "                 [--reps R]\n",
     "  MODEL_DIR     a quantized model folder (config.json with a quantization_config, safetensors)\n"
     "  --layer NAME  run this layer (repeatable), as vLLM names it (fused: qkv_proj, gate_up_proj);\n"
     "                default every layer of the model\n"
     "  --device SPEC  run on this device (repeatable): cpu, vulkan[:N], opencl[:N], cuda[:N] or a name\n"
     "                substring; default every device (one entry per physical GPU)\n"
     "  --tokens M    rows of random activations per layer (default 4)\n"
     "  --seed N      seed of the random activations (default 1)\n"
     "  --input FILE.safetensors  activations instead of random ones: one [M, K] tensor per layer, named\n"
     "                after the layer, in the model dtype or f32; M comes from its rows (a --tokens that\n"
     "                disagrees, another K or dtype, or a missing tensor is an error)\n"
     "  --output FILE.safetensors  write every device's result as tensor <layer>@<device>\n"
     "  --tp-size N   tensor parallelism: bind the partition of rank R of N (default 1)\n"
     "  --tp-rank R   the rank whose partition runs (0..N-1, default 0)\n"
     "  --ep-size N   MoE expert parallelism: rank R binds its contiguous experts (E/N each, the\n"
     "                first E%N ranks one more), whole; tokens routed elsewhere add nothing (default 1)\n"
     "  --ep-rank R   the expert-parallel rank (0..N-1, default 0)\n"
     "  --dtype auto|float16|bfloat16|float32  the model dtype (activations, unquantized weights, bias,\n"
     "                output), as vLLM's --dtype; auto (default): config.json's dtype / torch_dtype,\n"
     "                float32 downcast to bfloat16 as vLLM does (docs/loading.md); float32 runs on cpu only\n"
     "  --comm mpi|nccl|auto  run each layer across the ranks of an MPI job (implied by --tp-size or\n"
     "                --ep-size N > 1 without a rank under mpirun): linear layers tensor-parallel, MoE\n"
     "                blocks expert-parallel, N = the job's ranks; the r-th --device is rank r's\n"
     "                (cycling; default QPORT_DEVICE or the best device); rank 0 prints the table and\n"
     "                checks every layer against the cpu reference (docs/parallel.md)\n"
     "  --reps R      parallel mode: time R forwards per layer (after a warm-up); ms and the\n"
     "                collectives' share (comm) are the medians (default 1 run)\n"
     "  Integer schemes and the fp8 KV cache must be bit-exact; float schemes NMSE <= 2^-20.\n"},
};
#define N_ENTRIES (sizeof entries / sizeof *entries)

static const help_entry *find(const char *name) {
    for (size_t i = 0; name && i < N_ENTRIES; i++)
        if (!strcmp(entries[i].name, name)) return &entries[i];
    return NULL;
}

int tool_help(FILE *f, const char *cmd) {
    const help_entry *e = find(cmd);
    if (!e) return -1;
    fprintf(f, "%s%s\n\n%s", e->synopsis, e->summary, e->options);
    return 0;
}

void tool_usage(FILE *f, const char *cmd) {
    const help_entry *e = find(cmd);
    if (e) fprintf(f, "%s(qport help %s: every option)\n", e->synopsis, cmd);
}

void tool_help_commands(FILE *f) {
    fprintf(f, "usage: qport <command> [options]\n       qport help <command>   (or qport <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < N_ENTRIES; i++) fprintf(f, "  %-14s %s\n", entries[i].name, entries[i].summary);
    fprintf(f, "  %-14s %s\n  %-14s %s\n", "version", "print the library version", "help [COMMAND]",
            "this list, or one command's options");
}
