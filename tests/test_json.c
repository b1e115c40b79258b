/* Malformed and hostile configs: every one is a clear error, never a crash
 * (run under ASan/UBSan in CI's sanitizer build). */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

static qp_context *ctx;

static void load_fails(const char *json, size_t len, qp_status want, const char *needle, int line) {
    qp_config *c = NULL;
    qp_status st = qp_config_load_buffer(ctx, "bad.json", json, len, &c);
    const char *msg = qp_last_error(ctx);
    if (st != want || c || (needle && !strstr(msg, needle))) {
        tu_failures++;
        fprintf(stderr, "FAIL line %d: status %s (want %s), msg '%s' (want '%s')\n", line, qp_status_str(st),
                qp_status_str(want), msg, needle ? needle : "");
    }
    qp_config_destroy(c);
}
#define BAD(j, st, needle) load_fails(j, strlen(j), st, needle, __LINE__)

int main(void) {
    if (qp_context_create(&ctx) != QP_OK) return 1;
    BAD("", QP_ERR_PARSE, "empty");
    BAD("   ", QP_ERR_PARSE, "bad.json");
    BAD("{\"quant_method\": \"quark\"", QP_ERR_PARSE, "truncated");
    BAD("{\"quant_method\": qqq}", QP_ERR_PARSE, "invalid JSON");
    BAD("[1,2]", QP_ERR_PARSE, "must be a JSON object");
    BAD("{} {}", QP_ERR_PARSE, "extra data");
    BAD("{\"a\":01}", QP_ERR_PARSE, "bad");
    BAD("{\"a\":\"\\x\"}", QP_ERR_PARSE, "invalid JSON");
    BAD("{\"a\":\"\\u00\"}", QP_ERR_PARSE, "invalid JSON");
    BAD("{\"a\":\"\\u0000\"}", QP_ERR_PARSE, "NUL");
    /* syntax errors say where (line, column, byte) and what was expected */
    BAD("{\n  \"quant_method\": \"quark\",\n  \"global_quant_config\": {\"weight\": null}\n  \"exclude\": []\n}", QP_ERR_PARSE,
        "invalid JSON at line 4, column 3 (byte 73): expected ',' or '}' after an object member, got '\"'");
    BAD("{\"a\": [1, 2,]}", QP_ERR_PARSE, "line 1, column 13 (byte 12): expected a value after ',' (no trailing commas in JSON), got ']'");
    BAD("{\"a\": 1,}", QP_ERR_PARSE, "expected a string key after ',' (no trailing commas in JSON), got '}'");
    BAD("{\"a\" 1}", QP_ERR_PARSE, "expected ':' after the object key, got '1'");
    BAD("{\"a\": [1 2]}", QP_ERR_PARSE, "expected ',' or ']' after an array element, got '2'");
    BAD("{\"a\": tru}", QP_ERR_PARSE, "expected a value (an object, array, string, number, true, false or null), got 't'");
    BAD("{\"a\": \"x}", QP_ERR_PARSE, "expected a closing '\"' of the string, got the end of the text (truncated input)");
    BAD("{\"a\": \"x\ty\"}", QP_ERR_PARSE, "control characters must be escaped), got byte 0x09");
    BAD("{\"a\": -}", QP_ERR_PARSE, "expected a digit (bad number), got '}'");
    BAD("{\"a\": 1.e5}", QP_ERR_PARSE, "expected a digit after '.' (bad number), got 'e'");
    BAD("{\r\n\"a\": 1\r\n\r\n", QP_ERR_PARSE, "line 4, column 1 (byte 13): expected ',' or '}' after an object member, got the end");
    BAD("{\"quant_method\": 5}", QP_ERR_PARSE, "quant_method must be a string, got int");
    BAD("{\"quant_method\": \"gptq\"}", QP_ERR_UNSUPPORTED, "unsupported quant_method 'gptq'");
    BAD("{\"hidden_size\": 5}", QP_ERR_UNSUPPORTED, "no quant_method");
    BAD("{\"quantization_config\": []}", QP_ERR_PARSE, "quantization_config must be an object");
    BAD("{\"quant_method\":\"quark\",\"exclude\":\"lm_head\"}", QP_ERR_PARSE, "exclude must be a list of strings, got str");
    BAD("{\"quant_method\":\"quark\",\"exclude\":[\"a\",7]}", QP_ERR_PARSE, "exclude[1] must be a string, got int");
    BAD("{\"quant_method\":\"quark\",\"exclude\":[\"re:(unclosed\"]}", QP_ERR_PARSE, "exclude[0]");
    BAD("{\"quant_method\":\"quark\",\"exclude\":[\"re:a(?<!b*)c\"]}", QP_ERR_PARSE, "invalid regular expression");
    BAD("{\"quant_method\":\"quark\",\"layer_quant_config\":[]}", QP_ERR_PARSE, "layer_quant_config must be an object");
    BAD("{\"quant_method\":\"quark\",\"layer_quant_config\":{\"*x\":3}}", QP_ERR_PARSE, "layer_quant_config.*x must be an object");
    BAD("{\"quant_method\":\"quark\",\"global_quant_config\":\"fp8\"}", QP_ERR_PARSE, "global_quant_config must be an object");
    BAD("{\"quant_method\":\"quark\",\"export\":[]}", QP_ERR_PARSE, "export must be an object");
    BAD("{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":\"*k\"}}", QP_ERR_PARSE, "kv_cache_group must be a list");
    BAD("{\"quant_method\":\"quark\",\"packed_modules_mapping\":{\"qkv\":\"q\"}}", QP_ERR_PARSE, "packed_modules_mapping.qkv");
    BAD("{\"quant_method\":\"fp8\",\"activation_scheme\":\"static\",\"ignored_layers\":{}}", QP_ERR_PARSE, "ignored_layers");

    /* deep nesting: 100k levels is refused without recursion trouble */
    size_t n = 200000;
    char *deep = malloc(n * 2 + 32);
    strcpy(deep, "{\"quant_method\":\"quark\",\"x\":");
    size_t k = strlen(deep);
    for (size_t i = 0; i < n; i++) deep[k++] = '[';
    for (size_t i = 0; i < n; i++) deep[k++] = ']';
    deep[k++] = '}';
    load_fails(deep, k, QP_ERR_PARSE, "nesting", __LINE__);
    free(deep);

    /* huge strings and NUL bytes */
    size_t hn = 8 << 20;
    char *huge = malloc(hn + 64);
    k = (size_t)sprintf(huge, "{\"quant_method\":\"");
    memset(huge + k, 'q', hn);
    k += hn;
    k += (size_t)sprintf(huge + k, "\"}");
    load_fails(huge, k, QP_ERR_UNSUPPORTED, "unsupported quant_method", __LINE__);
    huge[3] = 0;
    load_fails(huge, k, QP_ERR_PARSE, "NUL", __LINE__);
    free(huge);

    /* truncations of a real config at every byte never crash */
    const char *good =
        "{\"quant_method\":\"quark\",\"export\":{\"kv_cache_group\":[\"*k_proj\"],\"pack_method\":\"reorder\"},"
        "\"global_quant_config\":{\"weight\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false},"
        "\"input_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\",\"is_dynamic\":false}},"
        "\"layer_quant_config\":{\"*k_proj\":{\"output_tensors\":{\"dtype\":\"fp8_e4m3\",\"qscheme\":\"per_tensor\"}}},"
        "\"exclude\":[\"lm_head\",\"re:.*gate$\"]}";
    size_t gl = strlen(good);
    int loaded = 0;
    for (size_t cut = 0; cut < gl; cut++) {
        qp_config *c = NULL;
        if (qp_config_load_buffer(ctx, "cut.json", good, cut, &c) == QP_OK) loaded++;
        qp_config_destroy(c);
    }
    CHECK(loaded == 0, "%d truncations loaded", loaded);
    qp_config *c = NULL;
    CHECK(qp_config_load_buffer(ctx, "good.json", good, gl, &c) == QP_OK, "%s", qp_last_error(ctx));
    qp_config_destroy(c);

    /* a whole config.json: model_type and nesting */
    c = tu_load(ctx, "{\"model_type\":\"llama\",\"quantization_config\":{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":-1}}");
    qp_config_summary sm;
    CHECK(c && qp_config_summarize(c, &sm) == QP_OK && sm.method == QP_METHOD_QQQ && sm.model_type &&
              !strcmp(sm.model_type, "llama"), "whole config.json");
    qp_config_destroy(c);

    /* files */
    CHECK(qp_config_load_file(ctx, "/nonexistent/config.json", &c) == QP_ERR_IO &&
              strstr(qp_last_error(ctx), "/nonexistent/config.json"), "%s", qp_last_error(ctx));
    CHECK(qp_config_load_file(ctx, "/", &c) != QP_OK, "directory");

    /* NULL arguments */
    CHECK(qp_config_load_buffer(NULL, "x", "{}", 2, &c) == QP_ERR_INVALID_ARGUMENT, "null ctx");
    CHECK(qp_config_load_buffer(ctx, "x", NULL, 2, &c) == QP_ERR_INVALID_ARGUMENT, "null text");
    CHECK(qp_config_resolve(NULL, "x", QP_LAYER_LINEAR, NULL, NULL) == QP_ERR_INVALID_ARGUMENT, "null cfg");
    c = tu_load(ctx, "{\"quant_method\":\"qqq\",\"wbits\":4,\"group_size\":-1}");
    qp_scheme s;
    CHECK(qp_config_resolve(c, NULL, QP_LAYER_LINEAR, NULL, &s) == QP_ERR_INVALID_ARGUMENT, "null layer");
    CHECK(qp_config_resolve(c, "x", (qp_layer_kind)9, NULL, &s) == QP_ERR_INVALID_ARGUMENT, "bad kind");
    qp_resolve_options o;
    qp_resolve_options_init(&o);
    o.struct_size = 3;
    CHECK(qp_config_resolve(c, "x", QP_LAYER_LINEAR, &o, &s) == QP_ERR_INVALID_ARGUMENT, "struct_size");
    qp_config_destroy(c);
    CHECK(!strcmp(qp_status_str(QP_ERR_VALUE), "QP_ERR_VALUE") && !strcmp(qp_status_str((qp_status)999), "QP_ERR_UNKNOWN"), "names");
    CHECK(!strcmp(qp_status_exception(QP_ERR_NOT_IMPLEMENTED), "NotImplementedError") && !qp_status_exception(QP_OK), "exc");
    char ver[32];
    snprintf(ver, sizeof ver, "%d.%d.%d", QP_VERSION_MAJOR, QP_VERSION_MINOR, QP_VERSION_PATCH);
    CHECK(!strcmp(qp_version(), ver), "%s vs %s", qp_version(), ver);
    qp_context_destroy(ctx);
    return tu_finish("test_json");
}
