/* The qport command: one subcommand per job; their help is in help.c. */
#include <stdio.h>
#include <string.h>

#include "tool.h"

int main(int argc, char **argv) {
    if (argc < 2) { tool_help_commands(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        if (argc < 3) { tool_help_commands(stdout); return 0; }
        if (tool_help(stdout, argv[2])) { fprintf(stderr, "qport: no command '%s'\n", argv[2]); tool_help_commands(stderr); return 2; }
        return 0;
    }
    /* `qport CMD --help` anywhere on the line: the command's help, whatever
     * else the line holds */
    for (int i = 2; i < argc; i++)
        if ((!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) && !tool_help(stdout, cmd)) return 0;
    if (!strcmp(cmd, "inspect")) return cmd_inspect(argc - 1, argv + 1);
    if (!strcmp(cmd, "demo-model")) return cmd_demo_model(argc - 1, argv + 1);
    if (!strcmp(cmd, "quantize")) return cmd_quantize(argc - 1, argv + 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "devices")) return cmd_devices(argc - 1, argv + 1);
    if (!strcmp(cmd, "conform")) return cmd_conform(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench")) return cmd_bench(argc - 1, argv + 1);
    if (!strcmp(cmd, "bench-resolve")) return cmd_bench_resolve(argc - 1, argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("qport %s\n", qp_version()); return 0; }
    fprintf(stderr, "qport: unknown command '%s'\n", cmd);
    tool_help_commands(stderr);
    return 2;
}
