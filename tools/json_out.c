#include <stdlib.h>
#include <string.h>

#include "tool.h"

void json_str(FILE *f, const char *s) {
    if (!s) { fputs("null", f); return; }
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

int parse_packed(const char *spec, qp_packed_module *out) {
    const char *eq = strchr(spec, '=');
    if (!eq || eq == spec || !eq[1]) return -1;
    char *fused = strndup(spec, (size_t)(eq - spec));
    char *rest = strdup(eq + 1);
    if (!fused || !rest) return -1;
    size_t n = 1;
    for (char *p = rest; *p; p++) n += *p == ',';
    const char **shards = calloc(n, sizeof *shards);
    if (!shards) return -1;
    size_t k = 0;
    for (char *tok = strtok(rest, ","); tok; tok = strtok(NULL, ",")) shards[k++] = tok;
    if (k == 0) return -1;
    out->fused = fused;
    out->shards = shards;
    out->n_shards = k;
    return 0;
}
