/* The numbers of a list of flat JSON objects held by one key of a JSON document, in columns:
 * the native half of runcompare.sources.formats._hf_trainer_json (read that module's docstring
 * first).
 *
 * columns(data, array, index, marked) reads `data` (UTF-8 bytes) as one JSON document that is
 * an object whose key `array` holds a list of objects ("entries"). Each entry must hold the
 * key `index` with a JSON integer (the entry's index, e.g. a step); every other key whose
 * value is a JSON number (NaN, Infinity and -Infinity included, true/false/null not) gives a
 * row: (key, value as float64, index as int64), in the entry's key order. Returns
 *
 *   (start, end, keys, key, value, index, spans, last_marked)
 *
 * start/end: the byte span of the list; keys: the keys that give rows (str), in the order of
 * their first row; key: each row's key, an index into keys (int32); value: float64; index:
 * int64; spans: each entry's byte span (int64 pairs); last_marked: the last entry in which
 * every key of `marked` (a tuple of bytes) holds a number, -1 if none.
 *
 * It accepts only what Python's json.loads accepts and reads it the same way (a JSON integer
 * is float(int) as a value), and returns None for anything it is not sure of, which the
 * caller then reads with json.loads: not JSON, not UTF-8, no such list, an entry that is not
 * an object or has no integer index (or one beyond int64), an integer value of 19 digits or
 * more, duplicate keys in an entry or `array` twice, a key with a backslash escape, nesting
 * deeper than MAX_DEPTH. The values of other keys of the document and the non-numbers of the
 * entries are checked only. The GIL is released while the document is read.
 *
 * Numbers are correctly rounded, as _decimal.h rounds them.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_decimal.h"

#define MAX_DEPTH 64
#define MAX_MARKED 8

typedef struct {
    char *data;
    size_t len, cap;
} Buffer;

static int put(Buffer *b, const void *src, size_t n) {
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n)
            cap *= 2;
        char *data = realloc(b->data, cap);
        if (!data)
            return -1;
        b->data = data;
        b->cap = cap;
    }
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* A key of the entries: its bytes in the document, and what it is. */
typedef struct {
    const unsigned char *s;
    size_t n;
    uint64_t hash;
    int32_t row_key;  /* index into the returned keys, -1 before its first row */
    int64_t stamp;    /* the last entry (+1) that held it: duplicates */
    int mark;         /* bit of `marked`, 0 if none */
    int is_index;
} Key;

typedef struct {
    const unsigned char *p, *start, *end;
    Key *keys;
    size_t nkeys, capkeys;
    int32_t *table; /* open addressing, -1 empty */
    size_t captable;
    int32_t row_keys; /* keys that gave a row so far */
    int32_t *expect;  /* the key at each member position of the entry before (-1: none) */
    size_t capexpect;
    Buffer order, key, value, index, spans;
    const unsigned char *index_name;
    size_t index_len;
    const unsigned char *marked[MAX_MARKED];
    size_t marked_len[MAX_MARKED];
    int nmarked;
    int64_t entries, last_marked;
    int failed_memory;
} Parser;

static void skip_ws(Parser *ps) {
    const unsigned char *p = ps->p, *end = ps->end;
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t'))
        p++;
    ps->p = p;
}

static int literal(Parser *ps, const char *word, size_t n) {
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
        return -1;
    ps->p += n;
    return 0;
}

/* The bytes of one UTF-8 character at p (a byte >= 0x80), 0 if not valid UTF-8 (as Python's
 * strict decoder: no overlongs, no surrogates, nothing above U+10FFFF). */
static size_t utf8(const unsigned char *p, const unsigned char *end) {
    unsigned char c = p[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        n = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        n = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return 0;
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xBF)
            return 0;
    return n;
}

static int hex(unsigned char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* A string at p ('"'); *escaped tells whether it holds a backslash escape. */
static int string(Parser *ps, int *escaped) {
    const unsigned char *p = ps->p + 1, *end = ps->end;
    *escaped = 0;
    for (;;) {
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\')
            p++;
        if (p >= end)
            return -1;
        unsigned char c = *p;
        if (c == '"') {
            ps->p = p + 1;
            return 0;
        }
        if (c == '\\') {
            *escaped = 1;
            if (end - p < 2)
                return -1;
            unsigned char e = p[1];
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n'
                || e == 'r' || e == 't')
                p += 2;
            else if (e == 'u' && end - p >= 6 && hex(p[2]) && hex(p[3]) && hex(p[4])
                     && hex(p[5]))
                p += 6;
            else
                return -1;
        } else if (c < 0x20) {
            return -1;
        } else {
            size_t n = utf8(p, end);
            if (!n)
                return -1;
            p += n;
        }
    }
}

/* A JSON number at p into *out; *is_int when it has no fraction and no exponent (then *ival
 * holds it). -1 if not a number, or one this reader leaves to Python. */
static int number(Parser *ps, double *out, int *is_int, int64_t *ival) {
    const unsigned char *p = ps->p, *end = ps->end, *s = p;
    int negative = 0;
    Decimal d = {0, 0, 0};
    if (s < end && *s == '-') {
        negative = 1;
        s++;
    }
    if (s >= end)
        return -1;
    const unsigned char *whole = s;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        s = decimal_digits(&d, s, end, 0);
    else
        return -1;
    int int_digits = (int)(s - whole), fraction = 0, exponent = 0;
    if (s < end && *s == '.') {
        const unsigned char *first = s + 1;
        s = decimal_digits(&d, first, end, 1);
        if (s == first)
            return -1;
        fraction = 1;
    }
    if (s < end && (*s == 'e' || *s == 'E')) {
        s++;
        int sign = 1, value = 0;
        if (s < end && (*s == '-' || *s == '+')) {
            sign = *s == '-' ? -1 : 1;
            s++;
        }
        const unsigned char *first = s;
        for (; s < end && *s >= '0' && *s <= '9'; s++)
            if (value < 100000)
                value = value * 10 + (*s - '0');
        if (s == first)
            return -1;
        d.exp10 += sign * value;
        exponent = 1;
    }
    ps->p = s;
    if (!fraction && !exponent) {
        if (int_digits > 18)
            return -1;
        int64_t v = (int64_t)d.mantissa;
        *ival = negative ? -v : v;
        *is_int = 1;
        *out = (double)*ival;
        return 0;
    }
    *is_int = 0;
    double value;
    if (decimal_value(&d, &value) == 0) {
        *out = negative ? -value : value;
        return 0;
    }
    return decimal_strtod(p, (size_t)(s - p), out);
}

/* The ':' after a member's name, and the whitespace around it. */
static int colon(Parser *ps) {
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != ':')
        return -1;
    ps->p++;
    skip_ws(ps);
    return 0;
}

/* A member's name at p, with no escape in it (a name with one is left to json.loads): its
 * bytes in *name, *n of them. */
static int plain_name(Parser *ps, const unsigned char **name, size_t *n) {
    int escaped;
    if (ps->p >= ps->end || *ps->p != '"')
        return -1;
    *name = ps->p + 1;
    if (string(ps, &escaped) || escaped)
        return -1;
    *n = (size_t)(ps->p - 1 - *name);
    return 0;
}

/* After a member or an element: 1 when a ',' (and the whitespace after it) was passed and
 * another follows, 0 when `close` ended the object or array, -1 for anything else. */
static int more(Parser *ps, char close) {
    skip_ws(ps);
    if (ps->p >= ps->end)
        return -1;
    if (*ps->p == ',') {
        ps->p++;
        skip_ws(ps);
        return 1;
    }
    if (*ps->p != close)
        return -1;
    ps->p++;
    return 0;
}

/* Any JSON value at p, checked and skipped. */
static int skip_value(Parser *ps, int depth) {
    if (ps->p >= ps->end)
        return -1;
    unsigned char c = *ps->p;
    double d;
    int is_int, escaped;
    int64_t i;
    switch (c) {
    case '"':
        return string(ps, &escaped);
    case 't':
        return literal(ps, "true", 4);
    case 'f':
        return literal(ps, "false", 5);
    case 'n':
        return literal(ps, "null", 4);
    case 'N':
        return literal(ps, "NaN", 3);
    case 'I':
        return literal(ps, "Infinity", 8);
    case '-':
        if (ps->end - ps->p > 1 && ps->p[1] == 'I')
            return literal(ps, "-Infinity", 9);
        return number(ps, &d, &is_int, &i);
    case '{':
    case '[':
        if (depth + 1 > MAX_DEPTH)
            return -1;
        ps->p++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == (c == '{' ? '}' : ']')) {
            ps->p++;
            return 0;
        }
        for (;;) {
            if (c == '{') {
                if (ps->p >= ps->end || *ps->p != '"' || string(ps, &escaped))
                    return -1;
                if (colon(ps))
                    return -1;
            }
            if (skip_value(ps, depth + 1))
                return -1;
            int next = more(ps, c == '{' ? '}' : ']');
            if (next <= 0)
                return next;
        }
    default:
        if (c >= '0' && c <= '9')
            return number(ps, &d, &is_int, &i);
        return -1;
    }
}

static uint64_t fnv(const unsigned char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

/* The key [s, s + n) of an entry, added on first sight; NULL when out of memory. */
static Key *key_of(Parser *ps, const unsigned char *s, size_t n) {
    uint64_t h = fnv(s, n);
    size_t mask = ps->captable - 1;
    for (size_t at = h & mask;; at = (at + 1) & mask) {
        int32_t k = ps->table[at];
        if (k < 0)
            break;
        Key *key = &ps->keys[k];
        if (key->hash == h && key->n == n && memcmp(key->s, s, n) == 0)
            return key;
    }
    if (ps->nkeys + 1 > ps->capkeys) {
        size_t cap = ps->capkeys * 2;
        Key *keys = realloc(ps->keys, cap * sizeof(Key));
        if (!keys)
            return NULL;
        ps->keys = keys;
        ps->capkeys = cap;
    }
    if ((ps->nkeys + 1) * 2 > ps->captable) {
        size_t cap = ps->captable * 2;
        int32_t *table = malloc(cap * sizeof(int32_t));
        if (!table)
            return NULL;
        memset(table, 0xff, cap * sizeof(int32_t));
        for (size_t k = 0; k < ps->nkeys; k++) {
            size_t at = ps->keys[k].hash & (cap - 1);
            while (table[at] >= 0)
                at = (at + 1) & (cap - 1);
            table[at] = (int32_t)k;
        }
        free(ps->table);
        ps->table = table;
        ps->captable = cap;
        mask = cap - 1;
    }
    size_t at = h & mask;
    while (ps->table[at] >= 0)
        at = (at + 1) & mask;
    ps->table[at] = (int32_t)ps->nkeys;
    Key *key = &ps->keys[ps->nkeys++];
    key->s = s;
    key->n = n;
    key->hash = h;
    key->row_key = -1;
    key->stamp = 0;
    key->mark = 0;
    key->is_index = n == ps->index_len && memcmp(s, ps->index_name, n) == 0;
    for (int m = 0; m < ps->nmarked; m++)
        if (n == ps->marked_len[m] && memcmp(s, ps->marked[m], n) == 0)
            key->mark = 1 << m;
    return key;
}

/* The key [s, s + n) at member `position` of an entry: the one at that position in the entry
 * before when it is the same (a logger writes the same keys in the same order: no hash),
 * else key_of's, remembered for the next entry; NULL when out of memory. */
static Key *expected(Parser *ps, size_t position, const unsigned char *s, size_t n) {
    if (position < ps->capexpect && ps->expect[position] >= 0) {
        Key *guess = &ps->keys[ps->expect[position]];
        if (guess->n == n && memcmp(guess->s, s, n) == 0)
            return guess;
    }
    Key *key = key_of(ps, s, n);
    if (!key)
        return NULL;
    if (position >= ps->capexpect) {
        size_t cap = ps->capexpect ? ps->capexpect * 2 : 16;
        while (cap <= position)
            cap *= 2;
        int32_t *expect = realloc(ps->expect, cap * sizeof(int32_t));
        if (!expect)
            return NULL;
        memset(expect + ps->capexpect, 0xff, (cap - ps->capexpect) * sizeof(int32_t));
        ps->expect = expect;
        ps->capexpect = cap;
    }
    ps->expect[position] = (int32_t)(key - ps->keys);
    return key;
}

/* One entry at p ('{'). */
static int entry(Parser *ps) {
    const unsigned char *start = ps->p;
    size_t first_row = ps->index.len / sizeof(int64_t);
    int64_t stamp = ps->entries + 1, step = 0;
    int have_step = 0, marks = 0;
    size_t position = 0;
    ps->p++;
    skip_ws(ps);
    for (;;) {
        const unsigned char *name;
        size_t n;
        if (plain_name(ps, &name, &n))
            return -1;
        Key *key = expected(ps, position, name, n);
        if (!key) {
            ps->failed_memory = 1;
            return -1;
        }
        position++;
        if (key->stamp == stamp)
            return -1;
        key->stamp = stamp;
        if (colon(ps))
            return -1;
        if (ps->p >= ps->end)
            return -1;
        unsigned char c = *ps->p;
        double value;
        int is_int = 0, is_number = 1;
        int64_t ival;
        if (c == '-' && ps->end - ps->p > 1 && ps->p[1] == 'I') {
            if (literal(ps, "-Infinity", 9))
                return -1;
            value = -HUGE_VAL;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            if (number(ps, &value, &is_int, &ival))
                return -1;
        } else if (c == 'N') {
            if (literal(ps, "NaN", 3))
                return -1;
            value = NAN;
        } else if (c == 'I') {
            if (literal(ps, "Infinity", 8))
                return -1;
            value = HUGE_VAL;
        } else {
            if (skip_value(ps, 3))
                return -1;
            is_number = 0;
        }
        if (key->is_index) {
            if (!is_int)
                return -1;
            step = ival;
            have_step = 1;
        } else if (is_number) {
            marks |= key->mark;
            if (key->row_key < 0) {
                int32_t k = (int32_t)(key - ps->keys);
                key->row_key = ps->row_keys++;
                if (put(&ps->order, &k, sizeof k))
                    goto memory;
            }
            if (put(&ps->key, &key->row_key, sizeof(int32_t))
                || put(&ps->value, &value, sizeof value) || put(&ps->index, &step, sizeof step))
                goto memory;
        }
        int next = more(ps, '}');
        if (next < 0)
            return -1;
        if (!next)
            break;
    }
    if (!have_step)
        return -1;
    int64_t *steps = (int64_t *)ps->index.data;
    for (size_t r = first_row; r < ps->index.len / sizeof(int64_t); r++)
        steps[r] = step;
    int64_t span[2] = {start - ps->start, ps->p - ps->start};
    if (put(&ps->spans, span, sizeof span))
        goto memory;
    if (ps->nmarked && marks == (1 << ps->nmarked) - 1)
        ps->last_marked = ps->entries;
    ps->entries++;
    return 0;
memory:
    ps->failed_memory = 1;
    return -1;
}

/* The list of entries at p ('['). */
static int entries(Parser *ps) {
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return 0;
    }
    for (;;) {
        if (ps->p >= ps->end || *ps->p != '{' || entry(ps))
            return -1;
        int next = more(ps, ']');
        if (next <= 0)
            return next;
    }
}

/* The whole document; the list's span into span. */
static int document(Parser *ps, const unsigned char *array, size_t array_len, int64_t *span) {
    int found = 0;
    skip_ws(ps);
    if (ps->p >= ps->end || *ps->p != '{')
        return -1;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}')
        return -1;
    for (;;) {
        const unsigned char *name;
        size_t n;
        if (plain_name(ps, &name, &n))
            return -1;
        if (colon(ps))
            return -1;
        if (n == array_len && memcmp(name, array, n) == 0) {
            if (found || ps->p >= ps->end || *ps->p != '[')
                return -1;
            found = 1;
            span[0] = ps->p - ps->start;
            if (entries(ps))
                return -1;
            span[1] = ps->p - ps->start;
        } else if (skip_value(ps, 1)) {
            return -1;
        }
        int next = more(ps, '}');
        if (next < 0)
            return -1;
        if (!next)
            break;
    }
    skip_ws(ps);
    return found && ps->p == ps->end ? 0 : -1;
}

#define BYTES(b) ((b).data ? (b).data : ""), (Py_ssize_t)(b).len

static PyObject *columns(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, array, index;
    PyObject *marked;
    if (!PyArg_ParseTuple(args, "y*y*y*O!", &data, &array, &index, &PyTuple_Type, &marked))
        return NULL;
    Parser ps;
    memset(&ps, 0, sizeof ps);
    PyObject *result = NULL;
    Py_ssize_t nmarked = PyTuple_GET_SIZE(marked);
    if (nmarked > MAX_MARKED) {
        PyErr_SetString(PyExc_ValueError, "too many marked keys");
        goto done;
    }
    for (Py_ssize_t m = 0; m < nmarked; m++) {
        PyObject *item = PyTuple_GET_ITEM(marked, m);
        if (!PyBytes_Check(item)) {
            PyErr_SetString(PyExc_TypeError, "marked keys must be bytes");
            goto done;
        }
        ps.marked[m] = (const unsigned char *)PyBytes_AS_STRING(item);
        ps.marked_len[m] = (size_t)PyBytes_GET_SIZE(item);
    }
    ps.nmarked = (int)nmarked;
    ps.start = ps.p = data.buf;
    ps.end = ps.start + data.len;
    ps.index_name = index.buf;
    ps.index_len = (size_t)index.len;
    ps.last_marked = -1;
    ps.capkeys = 64;
    ps.captable = 128;
    ps.keys = malloc(ps.capkeys * sizeof(Key));
    ps.table = malloc(ps.captable * sizeof(int32_t));
    if (!ps.keys || !ps.table) {
        PyErr_NoMemory();
        goto done;
    }
    memset(ps.table, 0xff, ps.captable * sizeof(int32_t));
    int64_t span[2] = {0, 0};
    int failed;
    Py_BEGIN_ALLOW_THREADS
    failed = document(&ps, array.buf, (size_t)array.len, span);
    Py_END_ALLOW_THREADS
    if (ps.failed_memory) {
        PyErr_NoMemory();
        goto done;
    }
    if (failed) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    PyObject *keys = PyList_New(ps.row_keys);
    if (!keys)
        goto done;
    const int32_t *order = (const int32_t *)ps.order.data;
    for (int32_t k = 0; k < ps.row_keys; k++) {
        Key *key = &ps.keys[order[k]];
        PyObject *name = PyUnicode_DecodeUTF8((const char *)key->s, (Py_ssize_t)key->n, "strict");
        if (!name) {
            Py_DECREF(keys);
            goto done;
        }
        PyList_SET_ITEM(keys, k, name);
    }
    result = Py_BuildValue("LLNy#y#y#y#L", (long long)span[0], (long long)span[1], keys,
                           BYTES(ps.key), BYTES(ps.value), BYTES(ps.index), BYTES(ps.spans),
                           (long long)ps.last_marked);
done:
    free(ps.keys);
    free(ps.table);
    free(ps.expect);
    free(ps.order.data);
    free(ps.key.data);
    free(ps.value.data);
    free(ps.index.data);
    free(ps.spans.data);
    PyBuffer_Release(&data);
    PyBuffer_Release(&array);
    PyBuffer_Release(&index);
    return result;
}

static PyMethodDef methods[] = {
    {"columns", columns, METH_VARARGS,
     "columns(data, array, index, marked) -> (start, end, keys, key, value, index, spans, "
     "last_marked) or None"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_jsoncols",
                                    "The numbers of a JSON document's list of flat objects, in "
                                    "columns (see runcompare.sources.formats._hf_trainer_json).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__jsoncols(void) {
    return PyModule_Create(&module);
}
