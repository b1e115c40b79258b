/* Activation quantizers against golden vectors made by an independent
 * implementation (tests/golden/gen_quant.py: numpy fp32 arithmetic and
 * ml_dtypes casts, written from docs/semantics.md), bit for bit: int8
 * static/dynamic sym/asym, fp8 static / dynamic tensor / dynamic token /
 * token-group (+UE8M0), MX fp4/fp6/fp8 with Quark's even scale, NVFP4.
 * Inputs include zeros, constants, huge, tiny (subnormal), NaN and +-inf
 * rows; where vLLM overrides a library cast the script says so. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

typedef struct gcase {
    char kind[16], name[32], p1[32], p2[32];
    int m, k;
    float *x;
    uint32_t *q, *s;
    long *z;
    size_t nx, nq, ns, nz;
} gcase;

static float fbits(uint32_t b) { float f; memcpy(&f, &b, 4); return f; }
static uint32_t ubits(float f) { uint32_t b; memcpy(&b, &f, 4); return b; }

/* "TAG N v1 .. vN" -> values parsed with `base` into a fresh array */
static void *read_vals(char *line, size_t *n, int base, size_t elem) {
    char *save, *tok = strtok_r(line, " \n", &save);
    tok = strtok_r(NULL, " \n", &save);
    *n = tok ? strtoul(tok, NULL, 10) : 0;
    void *out = calloc(*n ? *n : 1, elem);
    for (size_t i = 0; i < *n && (tok = strtok_r(NULL, " \n", &save)); i++) {
        if (elem == sizeof(long)) ((long *)out)[i] = strtol(tok, NULL, base);
        else ((uint32_t *)out)[i] = (uint32_t)strtoul(tok, NULL, base);
    }
    return out;
}

static int cases, mismatching;

static void cmp(const gcase *c, const char *what, const uint32_t *want, size_t n, const uint32_t *got) {
    int bad = 0;
    for (size_t i = 0; i < n; i++)
        if (want[i] != got[i] && bad++ < 3)
            fprintf(stderr, "  %s %s %s %s %s [%zu]: got %08x want %08x (x %08x)\n", c->kind, c->name, c->p1, c->p2, what, i,
                    got[i], want[i], i < c->nx ? ubits(c->x[i]) : 0u);
    if (bad) mismatching++;
    CHECK(bad == 0, "%s %s %s %s: %d %s mismatches", c->kind, c->name, c->p1, c->p2, bad, what);
}

static qp_dtype elem_of(const char *n) {
    return !strcmp(n, "fp4_e2m1") ? QP_DTYPE_F4_E2M1 : !strcmp(n, "fp6_e3m2") ? QP_DTYPE_F6_E3M2
         : !strcmp(n, "fp6_e2m3") ? QP_DTYPE_F6_E2M3 : QP_DTYPE_F8_E4M3FN;
}

static void run(gcase *c) {
    size_t n = (size_t)c->m * c->k;
    uint8_t *q8 = calloc(n, 1);
    float *sc = calloc(n, sizeof(float));
    int32_t *zp = calloc(n, sizeof(int32_t));
    uint32_t *gq = calloc(n, 4), *gs = calloc(n, 4);
    uint8_t *sb = calloc(n, 1);
    qp_status st = QP_ERR_INTERNAL;
    int s_bytes = 0;
    if (!strcmp(c->kind, "int8s")) {
        int azp = atoi(c->p2), sym = atoi(strchr(c->p2, ':') + 1);
        st = qp_quant_int8_static(NULL, c->x, c->m, c->k, fbits((uint32_t)strtoul(c->p1, NULL, 16)), azp, sym, (int8_t *)q8);
    } else if (!strcmp(c->kind, "int8d")) {
        st = qp_quant_int8_dynamic(NULL, c->x, c->m, c->k, atoi(c->p1), (int8_t *)q8, sc, zp);
    } else if (!strcmp(c->kind, "fp8s")) {
        st = qp_quant_fp8_static(NULL, c->x, n, fbits((uint32_t)strtoul(c->p1, NULL, 16)), q8);
    } else if (!strcmp(c->kind, "fp8t")) {
        st = qp_quant_fp8_dynamic_tensor(NULL, c->x, n, q8, sc);
    } else if (!strcmp(c->kind, "fp8k")) {
        st = qp_quant_fp8_dynamic_token(NULL, c->x, c->m, c->k, fbits((uint32_t)strtoul(c->p1, NULL, 16)), q8, sc);
    } else if (!strcmp(c->kind, "fp8g")) {
        st = qp_quant_fp8_group(NULL, c->x, c->m, c->k, strtoul(c->p1, NULL, 10), atoi(c->p2), q8, sc);
    } else if (!strcmp(c->kind, "mx")) {
        st = qp_quant_mx(NULL, elem_of(c->p1), c->x, c->m, c->k, q8, sb);
        s_bytes = 1;
    } else if (!strcmp(c->kind, "nvfp4")) {
        st = qp_quant_nvfp4(NULL, c->x, c->m, c->k, fbits((uint32_t)strtoul(c->p1, NULL, 16)), q8, sb);
        s_bytes = 1;
    }
    CHECK(st == QP_OK, "%s %s: status %s", c->kind, c->name, qp_status_str(st));
    if (st == QP_OK) {
        cases++;
        for (size_t i = 0; i < n; i++) gq[i] = q8[i];
        if (c->nq) cmp(c, "q", c->q, c->nq, gq);
        for (size_t i = 0; i < c->ns; i++) gs[i] = s_bytes ? sb[i] : ubits(sc[i]);
        if (c->ns) cmp(c, "s", c->s, c->ns, gs);
        if (c->nz) {
            uint32_t *wz = calloc(c->nz, 4);
            for (size_t i = 0; i < c->nz; i++) { wz[i] = (uint32_t)c->z[i]; gs[i] = (uint32_t)zp[i]; }
            cmp(c, "z", wz, c->nz, gs);
            free(wz);
        }
    }
    free(q8); free(sc); free(zp); free(gq); free(gs); free(sb);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "tests/golden/quant.txt";
    FILE *f = fopen(path, "r");
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return 1; }
    char *line = NULL;
    size_t cap = 0;
    gcase c;
    memset(&c, 0, sizeof c);
    while (getline(&line, &cap, f) > 0) {
        if (line[0] == '#' || line[0] == '\n') continue;
        if (!strncmp(line, "case ", 5)) {
            memset(&c, 0, sizeof c);
            sscanf(line, "case %15s %31s %d %d %31s %31s", c.kind, c.name, &c.m, &c.k, c.p1, c.p2);
        } else if (line[0] == 'x') {
            uint32_t *b = read_vals(line, &c.nx, 16, 4);
            c.x = malloc(sizeof(float) * (c.nx ? c.nx : 1));
            if (c.x) memcpy(c.x, b, sizeof(float) * c.nx); /* the fp32 bit patterns */
            free(b);
        } else if (line[0] == 'q') {
            c.q = read_vals(line, &c.nq, 16, 4);
        } else if (line[0] == 's') {
            c.s = read_vals(line, &c.ns, 16, 4);
        } else if (line[0] == 'z') {
            c.z = read_vals(line, &c.nz, 10, sizeof(long));
        } else if (!strncmp(line, "end", 3)) {
            CHECK(c.nx == (size_t)c.m * c.k, "%s %s: %zu inputs for %d x %d", c.kind, c.name, c.nx, c.m, c.k);
            if (c.nx == (size_t)c.m * c.k) run(&c);
            free(c.x); free(c.q); free(c.s); free(c.z);
            memset(&c, 0, sizeof c);
        }
    }
    free(line);
    fclose(f);
    printf("%d golden cases compared, %d with mismatches\n", cases, mismatching);
    CHECK(cases >= 60, "only %d cases read from %s", cases, path);
    return tu_finish("test_quant_golden");
}
