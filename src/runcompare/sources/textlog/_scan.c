/* Numbers out of the lines of a text log that share one layout: the native half of
 * runcompare.sources._layout (read that module's docstring first).
 *
 * scan(data, program, slots) walks the lines of `data` (any bytes-like object) once. A line
 * matches `program` when the program's operations consume it from its first byte to its
 * end; a matching line yields `slots` numbers, an other line is copied, whole, into `rest`.
 * The operations (one byte each, a literal after LIT/SKIPTO/UPTO/NOT/APART as 2-byte little-endian
 * length + bytes):
 *
 *   LIT s      the bytes s
 *   WS         one or more spaces
 *   NUM        -?[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?  -> a slot (correctly rounded double)
 *   INT        [0-9]{1,15}                             -> a slot (exact)
 *   TS         YYYY-MM-DD[ T]HH:MM:SS([.,][0-9]{1,6})? -> a slot (unix seconds, read as UTC)
 *   SKIPTO s   everything up to and including the first s
 *   UPTO s     everything before the first s
 *   END        trailing spaces, then the line's end
 *   POS        nothing                                 -> a slot (the byte offset in the line)
 *   NOT s      nothing, where s does not occur in the rest of the line
 *   APART s    nothing, where the last byte before it but ASCII whitespace is none of s's
 *              bytes and is ASCII
 *
 * Returns (lines, matched, values, rest, rest_lines): the number of lines in `data` (a last
 * line without newline counts), the 0-based indexes of the matching lines (int64), their
 * numbers (float64, `slots` per line, row-major), the other lines each ending in a newline,
 * and their indexes (int64). The GIL is released while the lines are walked.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../codecs/_decimal.h"

enum { OP_LIT = 1, OP_WS, OP_NUM, OP_TS, OP_SKIPTO, OP_END, OP_INT, OP_POS, OP_NOT, OP_UPTO,
       OP_APART };

typedef struct {
    char *data;
    size_t len, cap;
} Buffer;

static int grow(Buffer *b, size_t more) {
    if (b->len + more <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + more)
        cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data)
        return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static int put(Buffer *b, const void *src, size_t n) {
    if (n == 0)
        return 0;
    if (grow(b, n))
        return -1;
    memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* A number at p (before end) into *out, rounded as _decimal.h rounds it; the bytes read, 0
 * when none. */
static size_t number(const char *p, const char *end, double *out) {
    const unsigned char *s = (const unsigned char *)p, *stop = (const unsigned char *)end;
    int negative = 0;
    Decimal d = {0, 0, 0};
    if (s < stop && *s == '-') {
        negative = 1;
        s++;
    }
    const unsigned char *first = s;
    s = decimal_digits(&d, s, stop, 0);
    if (s == first)
        return 0;
    if (s < stop && *s == '.')
        s = decimal_digits(&d, s + 1, stop, 1);
    if (s < stop && (*s == 'e' || *s == 'E')) {
        const unsigned char *e = s + 1;
        int sign = 1, value = 0;
        if (e < stop && (*e == '-' || *e == '+')) {
            sign = *e == '-' ? -1 : 1;
            e++;
        }
        const unsigned char *edigits = e;
        for (; e < stop && *e >= '0' && *e <= '9'; e++)
            if (value < 100000)
                value = value * 10 + (*e - '0');
        if (e > edigits) {
            d.exp10 += sign * value;
            s = e;
        }
    }
    size_t used = (size_t)(s - (const unsigned char *)p);
    double value;
    if (decimal_value(&d, &value) == 0) {
        *out = negative ? -value : value;
        return used;
    }
    return decimal_strtod((const unsigned char *)p, used, out) == 0 ? used : 0;
}

static int digits(const char *p, int n) {
    int value = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        value = value * 10 + (p[i] - '0');
    }
    return value;
}

/* Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* A timestamp at p into *out (unix seconds, microseconds kept); the bytes read, 0 if none. */
static size_t timestamp(const char *p, const char *end, double *out) {
    static const int month_days[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (end - p < 19 || p[4] != '-' || p[7] != '-' || (p[10] != ' ' && p[10] != 'T')
        || p[13] != ':' || p[16] != ':')
        return 0;
    int year = digits(p, 4), month = digits(p + 5, 2), day = digits(p + 8, 2);
    int hour = digits(p + 11, 2), minute = digits(p + 14, 2), second = digits(p + 17, 2);
    if (year < 0 || month < 1 || month > 12 || day < 1 || day > month_days[month - 1]
        || (month == 2 && day == 29 && !(year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)))
        || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59)
        return 0;
    size_t used = 19;
    int64_t micros = 0;
    if (p + used < end && (p[used] == '.' || p[used] == ',')) {
        int n = 0;
        const char *f = p + used + 1;
        for (; f < end && *f >= '0' && *f <= '9'; f++, n++)
            micros = micros * 10 + (*f - '0');
        if (n == 0 || n > 6)
            return 0;
        for (; n < 6; n++)
            micros *= 10;
        used = (size_t)(f - p);
    }
    int64_t seconds = days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60
                      + second;
    *out = (double)(seconds * 1000000 + micros) / 1e6;
    return used;
}

/* How common a byte is in a log line (tqdm bars: spaces, digits, | / % and block characters);
 * a search anchors on the needle's two rarest bytes. */
static int commonness(unsigned char c) {
    if (c == ' ')
        return 4;
    if ((c >= '0' && c <= '9') || c == '|' || c == '/' || c == '%' || c == '.' || c >= 0x80)
        return 3;
    return c >= 'a' && c <= 'z' ? 2 : 1;
}

/* The first s in [p, end), looked for by memchr on s's rarest byte at i. */
static const char *find_rare(const char *p, const char *end, const char *s, size_t n, size_t i) {
    for (const char *from = p + i; (size_t)(end - from) >= n - i;) {
        const char *at = memchr(from, s[i], (size_t)(end - from) - (n - i) + 1);
        if (!at)
            return NULL;
        if (memcmp(at - i, s, n) == 0)
            return at - i;
        from = at + 1;
    }
    return NULL;
}

#if defined(__GNUC__)
/* 16 bytes at a time (SSE2, NEON: GCC's and clang's vector extension): the places where two
 * bytes of the needle both match, then a full compare there only (after W. Mula's
 * "SIMD-friendly algorithm" for substring search). For a needle of common bytes only, whose
 * rarest byte memchr would stop at again and again. */
typedef unsigned char Bytes16 __attribute__((vector_size(16)));

static const char *find_common(const char *p, const char *end, const char *s, size_t n,
                               size_t i, size_t j) {
    const char *limit = end - n + 1; /* one past the last place s can start */
    const Bytes16 at_i = (Bytes16){0} + (unsigned char)s[i];
    const Bytes16 at_j = (Bytes16){0} + (unsigned char)s[j];
    for (; limit - p >= 16; p += 16) {
        Bytes16 a, b, hit;
        uint64_t halves[2];
        memcpy(&a, p + i, 16);
        memcpy(&b, p + j, 16);
        hit = (Bytes16)((a == at_i) & (b == at_j));
        memcpy(halves, &hit, 16);
        if (halves[0] | halves[1])
            for (int k = 0; k < 16; k++)
                if (hit[k] && memcmp(p + k, s, n) == 0)
                    return p + k;
    }
    for (; p < limit; p++)
        if (p[i] == s[i] && memcmp(p, s, n) == 0)
            return p;
    return NULL;
}
#endif

/* One operation of a program, decoded once per scan: a literal's rarest bytes at i and j. */
typedef struct {
    unsigned char code;
    int common; /* the literal has common bytes only: find_common */
    size_t n, i, j;
    const char *lit;
} Op;

/* The operations of program into ops (as many as the program's bytes at most); their
 * number, or -1 when the program is malformed or does not fill exactly `slots` numbers. */
static Py_ssize_t decode(const unsigned char *program, Py_ssize_t length, Py_ssize_t slots,
                         Op *ops) {
    Py_ssize_t count = 0, filled = 0;
    for (const unsigned char *p = program, *end = program + length; p < end; count++) {
        Op *op = &ops[count];
        memset(op, 0, sizeof *op);
        op->code = *p++;
        if (op->code < OP_LIT || op->code > OP_APART)
            return -1;
        filled += op->code == OP_NUM || op->code == OP_INT || op->code == OP_TS
                  || op->code == OP_POS;
        if (op->code == OP_LIT || op->code == OP_SKIPTO || op->code == OP_UPTO
            || op->code == OP_NOT || op->code == OP_APART) {
            if (end - p < 2)
                return -1;
            op->n = (size_t)p[0] | (size_t)p[1] << 8;
            if (op->n == 0 || (size_t)(end - p) < 2 + op->n)
                return -1;
            op->lit = (const char *)p + 2;
            p += 2 + op->n;
            const unsigned char *s = (const unsigned char *)op->lit;
            for (size_t k = 1; k < op->n; k++)
                if (commonness(s[k]) < commonness(s[op->i]))
                    op->i = k;
            op->j = op->i;
            for (size_t k = 0; k < op->n; k++)
                if (k != op->i && (op->j == op->i || commonness(s[k]) < commonness(s[op->j])))
                    op->j = k;
            op->common = op->n > 1 && commonness(s[op->i]) >= 3;
        }
    }
    return filled == slots ? count : -1;
}

static const char *find(const char *p, const char *end, const Op *op) {
    if ((size_t)(end - p) < op->n)
        return NULL;
#if defined(__GNUC__)
    if (op->common)
        return find_common(p, end, op->lit, op->n, op->i, op->j);
#endif
    return find_rare(p, end, op->lit, op->n, op->i);
}

/* Whether the line [p, end) matches the program; its numbers into out. */
static int match(const char *p, const char *end, const Op *op, const Op *op_end, double *out) {
    const char *start = p;
    for (; op < op_end; op++) {
        size_t n = op->n;
        switch (op->code) {
        case OP_LIT:
            if ((size_t)(end - p) < n || memcmp(p, op->lit, n) != 0)
                return 0;
            p += n;
            break;
        case OP_WS: /* as many as there are, at least the one the layout's sample had: a
                     * parser's "iter (\d+)" or "\s+" takes none for no space */
            if (p == end || *p != ' ')
                return 0;
            while (p < end && *p == ' ')
                p++;
            break;
        case OP_NUM:
            if (!(n = number(p, end, out++)))
                return 0;
            p += n;
            break;
        case OP_INT: { /* a step or a count: digits, no sign, as the parsers' \d+ */
            const char *s = p;
            int64_t value = 0;
            for (; s < end && *s >= '0' && *s <= '9' && s - p < 15; s++)
                value = value * 10 + (*s - '0');
            if (s == p || (s < end && *s >= '0' && *s <= '9'))
                return 0;
            *out++ = (double)value;
            p = s;
            break;
        }
        case OP_TS:
            if (!(n = timestamp(p, end, out++)))
                return 0;
            p += n;
            break;
        case OP_SKIPTO:
        case OP_UPTO: {
            const char *at = find(p, end, op);
            if (!at)
                return 0;
            p = op->code == OP_UPTO ? at : at + n;
            break;
        }
        case OP_POS:
            *out++ = (double)(p - start);
            break;
        case OP_NOT:
            if (find(p, end, op))
                return 0;
            break;
        case OP_APART: { /* the last byte before here but ASCII spaces is none of the literal's
                          * (a parser's [=(,]\s*$); nor past ASCII, which its \s may take */
            const char *q = p;
            while (q > start && (q[-1] == ' ' || (q[-1] >= '\t' && q[-1] <= '\r')))
                q--;
            if (q > start && ((unsigned char)q[-1] >= 0x80 || memchr(op->lit, q[-1], n)))
                return 0;
            break;
        }
        case OP_END:
            while (p < end && *p == ' ')
                p++;
            if (p != end)
                return 0;
            break;
        default:
            return 0;
        }
    }
    return 1;
}

/* A buffer's bytes for Py_BuildValue's y# (which makes None of a NULL pointer). */
#define BYTES(b) ((b).data ? (b).data : ""), (Py_ssize_t)(b).len

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer data, program;
    Py_ssize_t slots;
    if (!PyArg_ParseTuple(args, "y*y*n", &data, &program, &slots))
        return NULL;
    Buffer matched = {0}, values = {0}, rest = {0}, rest_lines = {0};
    int64_t lines = 0;
    int failed = 0;
    double *row = slots > 0 ? malloc((size_t)slots * sizeof(double)) : NULL;
    Op *ops = malloc(((size_t)program.len + 1) * sizeof(Op));
    Py_ssize_t count = ops ? decode(program.buf, program.len, slots, ops) : 0;
    if (slots < 0 || (slots > 0 && !row) || !ops || count < 0) {
        free(row);
        free(ops);
        PyBuffer_Release(&data);
        PyBuffer_Release(&program);
        return ops && count < 0 ? PyErr_Format(PyExc_ValueError,
                                               "a malformed program, or not %zd numbers", slots)
                                : PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    const char *p = data.buf, *end = p + data.len;
    while (!failed && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;
        if (match(p, line_end, ops, ops + count, row)) {
            failed = put(&matched, &lines, sizeof lines)
                     || put(&values, row, (size_t)slots * sizeof(double));
        } else {
            failed = put(&rest, p, (size_t)(line_end - p)) || put(&rest, "\n", 1)
                     || put(&rest_lines, &lines, sizeof lines);
        }
        lines++;
        p = nl ? nl + 1 : end;
    }
    Py_END_ALLOW_THREADS
    free(row);
    free(ops);
    PyBuffer_Release(&data);
    PyBuffer_Release(&program);
    PyObject *result = NULL;
    if (failed)
        PyErr_NoMemory();
    else
        result = Py_BuildValue("Ly#y#y#y#", (long long)lines, BYTES(matched), BYTES(values),
                               BYTES(rest), BYTES(rest_lines));
    free(matched.data);
    free(values.data);
    free(rest.data);
    free(rest_lines.data);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(data, program, slots) -> (lines, matched, values, rest, rest_lines)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_scan",
                                    "Numbers out of the lines of a text log that share one "
                                    "layout (see runcompare.sources._layout).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__scan(void) { return PyModule_Create(&module); }
