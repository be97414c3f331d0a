/* sandbox/lang/ast: arena allocator and node-kind names for the language's AST
 * (ast.h). */
#include "sandbox/lang/ast.h"

#include <stdlib.h>
#include <string.h>

struct ast_arena_chunk {
    ast_arena_chunk *next;
    size_t size, used;
    _Alignas(16) unsigned char data[];
};

void ast_arena_init(ast_arena *a, size_t cap)
{
    a->head = NULL;
    a->used_total = 0;
    a->cap = cap;
}

void ast_arena_free(ast_arena *a)
{
    ast_arena_chunk *c = a->head;
    while (c) {
        ast_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
    a->used_total = 0;
}

void *ast_arena_alloc(ast_arena *a, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->cap && a->used_total + n > a->cap) return NULL;
    ast_arena_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = (size_t)64 * 1024;
        if (c && c->size < (size_t)1024 * 1024) sz = c->size * 2;
        if (sz < n) sz = n;
        ast_arena_chunk *nc = malloc(sizeof *nc + sz);
        if (!nc) return NULL;
        nc->size = sz;
        nc->used = 0;
        nc->next = c;
        a->head = c = nc;
    }
    void *p = c->data + c->used;
    c->used += n;
    a->used_total += n;
    memset(p, 0, n);
    return p;
}

char *ast_arena_strndup(ast_arena *a, const char *s, size_t n)
{
    char *p = ast_arena_alloc(a, n + 1);
    if (!p) return NULL;
    if (n) memcpy(p, s, n);
    p[n] = 0;
    return p;
}

ast_node *ast_new(ast_arena *ar, ast_kind kind)
{
    ast_node *n = ast_arena_alloc(ar, sizeof *n);
    if (!n) return NULL;
    n->kind = (uint8_t)kind;
    n->slot = -1;
    return n;
}

static const char *const kind_names[AST_KIND_COUNT] = {
    "Expression",    "BoolOp",    "BinOp",     "UnaryOp",        "IfExp",     "Dict",
    "Set",           "List",      "Tuple",     "ListComp",       "SetComp",   "DictComp",
    "comprehension", "Compare",   "Call",      "FormattedValue", "JoinedStr", "Constant",
    "Name",          "Attribute", "Subscript", "Slice",          "keyword",   "Lambda",
    "GeneratorExp",  "NamedExpr", "Starred",   "Await",          "Yield",     "YieldFrom",
};

static const char *const op_names[OPK_COUNT] = {
    "Add",    "Sub",    "Mult",     "MatMult", "Div", "Mod",  "Pow",   "LShift", "RShift", "BitOr",
    "BitXor", "BitAnd", "FloorDiv", "Invert",  "Not", "UAdd", "USub",  "And",    "Or",     "Eq",
    "NotEq",  "Lt",     "LtE",      "Gt",      "GtE", "Is",   "IsNot", "In",     "NotIn",
};

const char *ast_kind_name(ast_kind k)
{
    return (unsigned)k < AST_KIND_COUNT ? kind_names[k] : "?";
}

const char *ast_op_name(ast_opkind k)
{
    return (unsigned)k < OPK_COUNT ? op_names[k] : "?";
}
