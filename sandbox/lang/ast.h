/* sandbox/lang/ast: the syntax tree of the managed-evaluation language. Node kinds
 * mirror CPython 3.11's `ast` classes one to one (so the checker can name the
 * CPython class in its messages and count nodes as `ast.walk` does); operator
 * and context nodes are not materialised but implied by their parent (see
 * checker.c). Nodes live in an arena owned by the caller: one allocation
 * region per compilation, freed all at once. */
#ifndef FPS_AST_H
#define FPS_AST_H
#include <stddef.h>
#include <stdint.h>

/* ---- arena ------------------------------------------------------------ */
typedef struct ast_arena_chunk ast_arena_chunk;
typedef struct {
    ast_arena_chunk *head;
    size_t used_total; /* bytes handed out, for the size cap */
    size_t cap;        /* 0 = unlimited */
} ast_arena;

void ast_arena_init(ast_arena *a, size_t cap);
void ast_arena_free(ast_arena *a);
/* Zeroed, 16-byte aligned memory; NULL when the cap or malloc fails. */
void *ast_arena_alloc(ast_arena *a, size_t n);
char *ast_arena_strndup(ast_arena *a, const char *s, size_t n);

/* ---- node kinds --------------------------------------------------------- */
typedef enum {
    /* allowed by docs/LANGUAGE.md */
    AST_Expression,
    AST_BoolOp,
    AST_BinOp,
    AST_UnaryOp,
    AST_IfExp,
    AST_Dict,
    AST_Set,
    AST_List,
    AST_Tuple,
    AST_ListComp,
    AST_SetComp,
    AST_DictComp,
    AST_comprehension,
    AST_Compare,
    AST_Call,
    AST_FormattedValue,
    AST_JoinedStr,
    AST_Constant,
    AST_Name,
    AST_Attribute,
    AST_Subscript,
    AST_Slice,
    AST_keyword,
    /* recognised so they can be rejected by name */
    AST_Lambda,
    AST_GeneratorExp,
    AST_NamedExpr,
    AST_Starred,
    AST_Await,
    AST_Yield,
    AST_YieldFrom,
    AST_KIND_COUNT
} ast_kind;

/* Operators (BinOp / UnaryOp / BoolOp / Compare), CPython class names. */
typedef enum {
    OPK_Add,
    OPK_Sub,
    OPK_Mult,
    OPK_MatMult,
    OPK_Div,
    OPK_Mod,
    OPK_Pow,
    OPK_LShift,
    OPK_RShift,
    OPK_BitOr,
    OPK_BitXor,
    OPK_BitAnd,
    OPK_FloorDiv,
    OPK_Invert,
    OPK_Not,
    OPK_UAdd,
    OPK_USub,
    OPK_And,
    OPK_Or,
    OPK_Eq,
    OPK_NotEq,
    OPK_Lt,
    OPK_LtE,
    OPK_Gt,
    OPK_GtE,
    OPK_Is,
    OPK_IsNot,
    OPK_In,
    OPK_NotIn,
    OPK_COUNT
} ast_opkind;

typedef enum {
    CONST_NONE,
    CONST_TRUE,
    CONST_FALSE,
    CONST_ELLIPSIS,
    CONST_INT,   /* str = digits without underscores or prefix, base in `base` */
    CONST_FLOAT, /* f */
    CONST_IMAG,  /* f = imaginary part */
    CONST_STR,   /* str/len: UTF-8 (surrogates as 3-byte sequences) */
    CONST_BYTES, /* str/len: raw bytes */
} ast_constkind;

enum { CTX_LOAD = 0, CTX_STORE = 1 };

typedef struct ast_node ast_node;
struct ast_node {
    uint8_t kind;   /* ast_kind */
    uint8_t op;     /* ast_opkind, ast_constkind, or FormattedValue conversion (0 = none) */
    uint8_t ctx;    /* CTX_LOAD / CTX_STORE for Name Attribute Subscript Starred List Tuple */
    uint8_t flags;  /* comprehension: is_async; Constant INT: base */
    uint32_t n;     /* count of items (and of ops for Compare) */
    uint32_t n2;    /* count of items2 */
    int32_t slot;   /* evaluator: resolved name slot (-1 = unresolved) */
    uint32_t depth; /* nesting depth as CPython's ast2obj counts it (this node included) */
    ast_node *a, *b, *c;
    ast_node **items;
    ast_node **items2;
    uint8_t *ops; /* Compare operators */
    const char *str;
    size_t len;
    double f;
    void *cache; /* evaluator: prebuilt constant value, etc. (borrowed) */
};
/* Field use per kind:
 *   Expression a=body | BoolOp op items | BinOp a op b | UnaryOp op a
 *   IfExp a=test b=body c=orelse | Dict items=keys (NULL = **) items2=values
 *   Set/List/Tuple items | ListComp/SetComp/GeneratorExp a=elt items=generators
 *   DictComp a=key b=value items=generators
 *   comprehension a=target b=iter items=ifs flags=is_async
 *   Compare a=left ops items=comparators | Call a=func items=args items2=keywords
 *   keyword str=arg (NULL = **) a=value
 *   FormattedValue a=value op=conversion ('s','r','a' or 0) b=format_spec (JoinedStr or NULL)
 *   JoinedStr items | Constant op=constkind str/len/f | Name str
 *   Attribute a=value str=attr | Subscript a=value b=slice | Slice a b c (each may be NULL)
 *   Starred a | Lambda a=body | NamedExpr a=target b=value | Await/Yield/YieldFrom a (may be NULL)
 */

const char *ast_kind_name(ast_kind k);
const char *ast_op_name(ast_opkind k);

ast_node *ast_new(ast_arena *ar, ast_kind kind);

#endif
