/* tests/bench/lang/inproc: the interpreter alone, in-process (no jail), for
 * bench_lang.py. Usage: inproc TRANSCRIPT < lines of {"name","kind","source"}
 * Prints {"ingest_ms": best simg_build_text time} then, per input line,
 * {"name", "ms": best time of one lang_eval, "outcome": the outcome line}.
 * Not a test: a benchmark helper compiled by bench_lang.py against build/. */
#include "sandbox/lang/lang.h"
#include "sandbox/lang/simg.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: inproc TRANSCRIPT < expressions.jsonl\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    if (text == NULL || fread(text, 1, (size_t)n, f) != (size_t)n) return 1;
    fclose(f);
    text[n] = '\0';

    void *img = NULL;
    size_t img_len = 0;
    fps_err err;
    double best_ingest = 1e18;
    for (int i = 0; i < 5; i++) {
        free(img);
        double t0 = now_ms();
        if (simg_build_text(text, (size_t)n, NULL, 0, &img, &img_len, &err) != 0) {
            fprintf(stderr, "ingest: %s\n", err.msg);
            return 1;
        }
        double dt = now_ms() - t0;
        if (dt < best_ingest) best_ingest = dt;
    }
    printf("{\"ingest_ms\": %.3f}\n", best_ingest);

    char line[65536];
    while (fgets(line, sizeof line, stdin) != NULL) {
        json_error_t je;
        json_t *in = json_loads(line, 0, &je);
        const char *name = json_string_value(json_object_get(in, "name"));
        const char *kind_s = json_string_value(json_object_get(in, "kind"));
        const char *src = json_string_value(json_object_get(in, "source"));
        lang_kind kind;
        if (in == NULL || name == NULL || src == NULL || lang_kind_parse(kind_s, &kind) != 0) {
            fprintf(stderr, "bad input line\n");
            return 2;
        }
        double best = 1e18, spent = 0;
        char *outcome = NULL;
        for (int i = 0; i < 200 && (i < 3 || spent < 300); i++) {
            free(outcome);
            double t0 = now_ms();
            outcome = lang_eval(kind, src, strlen(src), "q", img, img_len, NULL);
            double dt = now_ms() - t0;
            spent += dt;
            if (dt < best) best = dt;
        }
        json_t *o = json_pack("{s:s, s:f, s:s}", "name", name, "ms", best, "outcome",
                              outcome ? outcome : "");
        char *s = json_dumps(o, JSON_COMPACT);
        printf("%s\n", s);
        free(s);
        json_decref(o);
        free(outcome);
        json_decref(in);
    }
    free(img);
    free(text);
    return 0;
}
