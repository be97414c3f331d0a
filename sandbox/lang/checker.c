/* sandbox/lang/checker: docs/LANGUAGE.md's source checks (checker.h), mirroring the
 * reference SDK's source.py walk: breadth-first, first violation wins, the
 * node ceiling counted as ast.walk counts. */
#include "sandbox/lang/checker.h"

#include "sandbox/lang/parser.h"

#include <stdlib.h>
#include <string.h>

static const char *const data_attrs[] = {
    "events",
    "event_count",
    "event_type",
    "payload",
    "id",
    "ts",
    "agent_id",
    "environment",
    "session_id",
    "session_revision_id",
    "assignment_id",
    "started_at",
    "ended_at",
    "schema_version",
};

static const char *const method_attrs[] = {
    "events_of_type",
    "count",
    "get",
    "keys",
    "values",
    "items",
    "lower",
    "upper",
    "strip",
    "lstrip",
    "rstrip",
    "split",
    "rsplit",
    "splitlines",
    "startswith",
    "endswith",
    "replace",
    "find",
    "rfind",
    "index",
    "join",
    "title",
    "capitalize",
    "casefold",
    "swapcase",
    "isdigit",
    "isalpha",
    "isalnum",
    "isspace",
    "isnumeric",
    "isdecimal",
    "islower",
    "isupper",
    "istitle",
    "zfill",
    "ljust",
    "rjust",
    "center",
    "partition",
    "rpartition",
    "removeprefix",
    "removesuffix",
    "encode",
    "decode",
    "hex",
    "union",
    "intersection",
    "difference",
    "symmetric_difference",
    "issubset",
    "issuperset",
    "isdisjoint",
};

int checker_is_data_attr(const char *name)
{
    for (size_t i = 0; i < sizeof data_attrs / sizeof data_attrs[0]; i++)
        if (!strcmp(name, data_attrs[i])) return 1;
    return 0;
}

int checker_is_method_attr(const char *name)
{
    for (size_t i = 0; i < sizeof method_attrs / sizeof method_attrs[0]; i++)
        if (!strcmp(name, method_attrs[i])) return 1;
    return 0;
}

#define CALLED_FUNC 0x40 /* Attribute flag: is the func of a Call */
#define PSEUDO_CTX 200   /* queue entry: a Load/Store context node */

typedef struct {
    const ast_node *n; /* NULL for operator/context pseudo nodes */
    int op;            /* ast_opkind or PSEUDO_CTX for pseudo nodes */
} qent;

typedef struct {
    qent *v;
    size_t head, len, cap, limit;
    int oom;
} queue;

static void qpush(queue *q, const ast_node *n, int op)
{
    if (q->len >= q->limit || q->oom) return; /* never reached by the walk */
    if (q->len == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 256;
        qent *nv = realloc(q->v, nc * sizeof *nv);
        if (!nv) {
            q->oom = 1;
            return;
        }
        q->v = nv;
        q->cap = nc;
    }
    q->v[q->len].n = n;
    q->v[q->len].op = op;
    q->len++;
}

static void push_node(queue *q, const ast_node *n)
{
    if (n) qpush(q, n, -1);
}

/* ast.iter_child_nodes order (fields in _fields order). */
static void push_children(queue *q, ast_node *x)
{
    uint32_t i;
    switch (x->kind) {
    case AST_Expression:
        push_node(q, x->a);
        break;
    case AST_BoolOp:
        qpush(q, NULL, x->op);
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]);
        break;
    case AST_BinOp:
        push_node(q, x->a);
        qpush(q, NULL, x->op);
        push_node(q, x->b);
        break;
    case AST_UnaryOp:
        qpush(q, NULL, x->op);
        push_node(q, x->a);
        break;
    case AST_IfExp:
        push_node(q, x->a);
        push_node(q, x->b);
        push_node(q, x->c);
        break;
    case AST_Dict:
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]); /* None keys skipped */
        for (i = 0; i < x->n2; i++)
            push_node(q, x->items2[i]);
        break;
    case AST_Set:
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]);
        break;
    case AST_List:
    case AST_Tuple:
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]);
        qpush(q, NULL, PSEUDO_CTX);
        break;
    case AST_ListComp:
    case AST_SetComp:
        push_node(q, x->a);
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]);
        break;
    case AST_DictComp:
    case AST_comprehension:
        push_node(q, x->a);
        push_node(q, x->b);
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]);
        break;
    case AST_Compare:
        push_node(q, x->a);
        for (i = 0; i < x->n; i++)
            qpush(q, NULL, x->ops[i]);
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]);
        break;
    case AST_Call:
        if (x->a->kind == AST_Attribute) x->a->flags |= CALLED_FUNC;
        push_node(q, x->a);
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]);
        for (i = 0; i < x->n2; i++)
            push_node(q, x->items2[i]);
        break;
    case AST_keyword:
        push_node(q, x->a);
        break;
    case AST_FormattedValue:
        push_node(q, x->a);
        push_node(q, x->b);
        break;
    case AST_JoinedStr:
        for (i = 0; i < x->n; i++)
            push_node(q, x->items[i]);
        break;
    case AST_Name:
        qpush(q, NULL, PSEUDO_CTX);
        break;
    case AST_Attribute:
        push_node(q, x->a);
        qpush(q, NULL, PSEUDO_CTX);
        break;
    case AST_Subscript:
        push_node(q, x->a);
        push_node(q, x->b);
        qpush(q, NULL, PSEUDO_CTX);
        break;
    case AST_Slice:
        push_node(q, x->a);
        push_node(q, x->b);
        push_node(q, x->c);
        break;
    default: /* Constant; disallowed kinds are never expanded */
        break;
    }
}

static int op_allowed(int op)
{
    switch (op) {
    case OPK_MatMult:
    case OPK_LShift:
    case OPK_RShift:
    case OPK_BitOr:
    case OPK_BitXor:
    case OPK_BitAnd:
    case OPK_Invert:
        return 0;
    default:
        return 1;
    }
}

static int small_int_const(const ast_node *c, unsigned long *out)
{
    if (c->kind != AST_Constant || c->op != CONST_INT) return 0;
    if (c->len > 8) { /* leading zeros are stripped: more digits means > 64 */
        *out = 1000;
        return 1;
    }
    *out = strtoul(c->str, NULL, c->flags ? c->flags : 10);
    return 1;
}

/* Errors compile() raises after the reference's checks passed. */
static int compile_error(const ast_node *x)
{
    if (x->kind == AST_comprehension && x->flags) return 1; /* async outside async function */
    if (x->kind == AST_Call) {
        for (uint32_t i = 0; i < x->n2; i++) {
            const char *a = x->items2[i]->str;
            if (!a) continue;
            for (uint32_t j = 0; j < i; j++)
                if (x->items2[j]->str && !strcmp(a, x->items2[j]->str)) return 1;
        }
    }
    return 0;
}

int checker_check(ast_node *root, const char *field, strbuf *msg)
{
    queue q = {.limit = CHECKER_MAX_NODES + 2};
    size_t count = 0;
    int rc = 0, late = 0;
    push_node(&q, root);
    while (q.head < q.len) {
        qent e = q.v[q.head++];
        if (++count > CHECKER_MAX_NODES) {
            strbuf_printf(msg, "%s is too large (%d-node ceiling)", field, CHECKER_MAX_NODES);
            rc = 1;
            break;
        }
        if (!e.n) {
            if (e.op != PSEUDO_CTX && !op_allowed(e.op)) {
                strbuf_printf(msg, "%s contains disallowed syntax: %s", field,
                              ast_op_name((ast_opkind)e.op));
                rc = 1;
                break;
            }
            continue;
        }
        ast_node *x = (ast_node *)e.n;
        if (x->kind > AST_keyword) {
            strbuf_printf(msg, "%s contains disallowed syntax: %s", field,
                          ast_kind_name((ast_kind)x->kind));
            rc = 1;
            break;
        }
        push_children(&q, x);
        if (q.oom) {
            rc = -1;
            break;
        }
        if (x->kind == AST_BinOp && x->op == OPK_Pow) {
            unsigned long v;
            if (!small_int_const(x->b, &v) || v > CHECKER_MAX_POW) {
                strbuf_printf(msg, "%s exponent must be an integer constant in 0..%d", field,
                              CHECKER_MAX_POW);
                rc = 1;
                break;
            }
        }
        if (x->kind == AST_Attribute) {
            if (x->str[0] == '_') {
                strbuf_printf(msg, "%s may not access private or dunder attributes", field);
                rc = 1;
                break;
            }
            int method = checker_is_method_attr(x->str);
            if (!method && !checker_is_data_attr(x->str)) {
                strbuf_printf(msg, "%s may not access attribute '%s'", field, x->str);
                rc = 1;
                break;
            }
            if (method && !(x->flags & CALLED_FUNC)) {
                strbuf_printf(msg,
                              "%s may reference method '%s' only to call it; a bare bound "
                              "method leaks a heap address when stringified",
                              field, x->str);
                rc = 1;
                break;
            }
        }
        if (x->kind == AST_Name && x->str[0] == '_') {
            strbuf_printf(msg, "%s may not access private names", field);
            rc = 1;
            break;
        }
    }
    /* compile()'s own errors, once every node passed (at most 5000 visited). */
    for (size_t i = 0; rc == 0 && i < q.len; i++)
        if (q.v[i].n && compile_error(q.v[i].n)) late = 1;
    free(q.v);
    if (root->depth > COMPILE_MAX_DEPTH) late = 1;
    if (rc == 0 && late) {
        strbuf_printf(msg, "%s must be one expression", field);
        rc = 1;
    }
    return rc;
}
