/* sandbox/lang: entry points of the language (lang.h). PLACEHOLDER until the
 * interpreter lands: rejects every source. Owned by the language work. */
#include "sandbox/lang.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int lang_kind_parse(const char *s, lang_kind *out)
{
    if (!strcmp(s, "raw")) *out = LANG_RAW;
    else if (!strcmp(s, "condition")) *out = LANG_CONDITION;
    else if (!strcmp(s, "evaluator")) *out = LANG_EVALUATOR;
    else return -1;
    return 0;
}

int lang_check(lang_kind kind, const char *src, size_t len, char *msg, size_t msgcap)
{
    snprintf(msg, msgcap, "%s is not supported yet",
             kind == LANG_CONDITION ? "condition_source" : "evaluator_source");
    return 1;
}

char *lang_eval(lang_kind kind, const char *src, size_t len, const char *eval_key,
                const void *img, size_t img_len, const lang_limits *limits)
{
    return strdup("{\"ok\": false, \"stage\": \"compile\", \"message\": \"not supported yet\"}");
}
