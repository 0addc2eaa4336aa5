/* The native half of reading TensorBoard event files: protobuf messages walked field by
 * field, many at once (runcompare.sources.codecs.protowire.walk and group_spans), and the
 * chain of TFRecord records checked (runcompare.sources.codecs.tfrecord._chain and _verify).
 * Read those functions and their docstrings first; this file gives exactly their results,
 * lane after lane instead of field after field.
 *
 * walk(buf, start, end, numbers, repeated) walks the messages buf[start[i]:end[i]] (`start`
 * and `end` int64 arrays as bytes-like objects). For each field number in `numbers` it keeps
 * the last occurrence in every lane; every occurrence of field `repeated` (-1: none) with
 * wire type 2 becomes a row (lane, payload offset, payload length). Returns
 *
 *   (bad, columns, rows_lane, rows_start, rows_length)
 *
 * as bytearrays (bool, int64): `columns` has, per number, None when the field occurs in no
 * lane, else (wire int8, a int64, b int64 or None, repeated bool or None), None standing for
 * all zeros. Returns None when a lane to walk lies outside `buf` (the caller's numpy path
 * then says what that means). The GIL is released while the lanes are walked; it is taken
 * back only to allocate a column the first time its field occurs and to grow the rows.
 *
 * group(buf, start, length) factorises the byte strings buf[start[i]:start[i] + length[i]]:
 * returns (codes, first) as bytearrays, the uint32 code of each span (distinct strings
 * numbered in order of first appearance) and the int64 index of each string's first span;
 * None when a span lies outside `buf`. Exact: a hash table of the strings, compared bytewise.
 *
 * chain(buf, pos) follows the records `u64 length | u32 masked crc(length) | data | u32
 * masked crc(data)` from `pos`, one after the other, while a whole record fits in `buf`:
 * returns (heads, lengths, good, stop, garbage), the records' header offsets and lengths
 * (int64) before the first whose length CRC fails, whether each one's data CRC holds (bool),
 * the offset where the records stopped fitting and that of the first bad header (-1: none).
 * crc32c(data) is the standard CRC-32C (SSE4.2's instruction where the CPU has it, a table
 * elsewhere); FAST_CRC says which.
 *
 * Malformed fields, as in the numpy code: field number 0 and wire types 3, 4, 6, 7 end past
 * the buffer; a varint is read through the last byte of the buffer (a read past it rereads
 * that byte) and one longer than 10 bytes or running past the buffer ends past the buffer; a
 * length is a varint taken as int64 (a length past 2**63 is negative) and the field ends at
 * offset + length (wrapping like int64). A field ending past its lane's end or not after its
 * key marks the lane bad and stops it, after the field's values were stored.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 64

typedef struct {
    long long number;
    PyObject *wire_o, *a_o, *b_o, *rep_o;
    int8_t *wire;
    int64_t *a, *b;
    uint8_t *rep;
} Column;

typedef struct {
    PyThreadState *released;
    Py_ssize_t lanes;
    PyObject *row_o[3];
    int64_t *row[3];
    Py_ssize_t rows, row_cap;
} Walker;

/* A bytearray of `bytes` bytes, filled with `fill` (-1: left as is), its data in *data. */
static PyObject *array(Walker *w, Py_ssize_t bytes, int fill, void **data) {
    PyEval_RestoreThread(w->released);
    PyObject *obj = PyByteArray_FromStringAndSize(NULL, bytes);
    w->released = PyEval_SaveThread();
    if (!obj)
        return NULL;
    *data = PyByteArray_AS_STRING(obj);
    if (fill >= 0)
        memset(*data, fill, (size_t)bytes);
    return obj;
}

static int column_wire(Walker *w, Column *c) {
    void *p;
    if (!(c->wire_o = array(w, w->lanes, 0xFF, &p)))
        return -1;
    c->wire = p;
    if (!(c->a_o = array(w, w->lanes * 8, 0, &p)))
        return -1;
    c->a = p;
    return 0;
}

static int column_b(Walker *w, Column *c) {
    void *p;
    if (!(c->b_o = array(w, w->lanes * 8, 0, &p)))
        return -1;
    c->b = p;
    return 0;
}

static int column_rep(Walker *w, Column *c) {
    void *p;
    if (!(c->rep_o = array(w, w->lanes, 0, &p)))
        return -1;
    c->rep = p;
    return 0;
}

static int add_row(Walker *w, int64_t lane, int64_t at, int64_t length) {
    if (w->rows == w->row_cap) {
        Py_ssize_t cap = w->row_cap ? w->row_cap * 2 : (w->lanes > 1024 ? w->lanes : 1024);
        int failed = 0;
        PyEval_RestoreThread(w->released);
        for (int k = 0; k < 3 && !failed; k++) {
            if (!w->row_o[k])
                failed = !(w->row_o[k] = PyByteArray_FromStringAndSize(NULL, cap * 8));
            else
                failed = PyByteArray_Resize(w->row_o[k], cap * 8) < 0;
            if (!failed)
                w->row[k] = (int64_t *)PyByteArray_AS_STRING(w->row_o[k]);
        }
        w->released = PyEval_SaveThread();
        if (failed)
            return -1;
        w->row_cap = cap;
    }
    w->row[0][w->rows] = lane;
    w->row[1][w->rows] = at;
    w->row[2][w->rows] = length;
    w->rows++;
    return 0;
}

/* The varint at `at`, read through the buffer's last byte; its end in *after (size + 1 when
 * longer than 10 bytes or past the buffer). */
static inline uint64_t varint(const uint8_t *buf, int64_t size, int64_t at, int64_t *after) {
    int64_t last = size - 1;
    uint8_t byte = buf[at < last ? at : last];
    uint64_t value = byte & 0x7F;
    int64_t end = at + 1;
    for (int shift = 7; byte >= 0x80 && shift < 70; shift += 7) {
        byte = buf[end < last ? end : last];
        value |= (uint64_t)(byte & 0x7F) << shift;
        end++;
    }
    *after = byte >= 0x80 || end > size ? size + 1 : end;
    return value;
}

/* Walk every lane; 0 when done, 1 when a lane lies outside the buffer, -1 on an error. */
static int walk_lanes(Walker *w, const uint8_t *buf, int64_t size, const int64_t *start,
                      const int64_t *end, Column *cols, Py_ssize_t ncols, const int8_t *small,
                      long long repeated, uint8_t *bad) {
    for (Py_ssize_t i = 0; i < w->lanes; i++) {
        int64_t p = start[i], stop = end[i];
        if (p >= stop)
            continue;
        if (p < 0 || stop > size)
            return 1;
        for (;;) {
            int64_t here = p, at, nxt;
            uint64_t key = buf[p];
            if (key < 0x80)
                at = p + 1;
            else
                key = varint(buf, size, p, &at);
            uint64_t number = key >> 3;
            int wire = (int)(key & 7);
            if (number == 0 || wire == 3 || wire == 4 || wire > 5) {
                nxt = size + 1;
            } else {
                Column *c = NULL;
                if (number < 64) {
                    if (small[number] >= 0)
                        c = &cols[small[number]];
                } else {
                    for (Py_ssize_t k = 0; k < ncols; k++)
                        if ((uint64_t)cols[k].number == number)
                            c = &cols[k];
                }
                if (c) {
                    if (!c->wire && column_wire(w, c))
                        return -1;
                    if (c->wire[i] >= 0) {
                        if (!c->rep && column_rep(w, c))
                            return -1;
                        c->rep[i] = 1;
                    }
                    c->wire[i] = (int8_t)wire;
                }
                if (wire == 1 || wire == 5) {
                    if (c)
                        c->a[i] = at;
                    nxt = at + (wire == 1 ? 8 : 4);
                } else {
                    int64_t after;
                    uint64_t value = varint(buf, size, at, &after);
                    if (wire == 0) {
                        if (c)
                            c->a[i] = (int64_t)value;
                        nxt = after;
                    } else {
                        if (repeated >= 0 && number == (uint64_t)repeated
                            && add_row(w, i, after, (int64_t)value))
                            return -1;
                        if (c) {
                            if (!c->b && column_b(w, c))
                                return -1;
                            c->a[i] = after;
                            c->b[i] = (int64_t)value;
                        }
                        nxt = (int64_t)((uint64_t)after + value);
                    }
                }
            }
            if (nxt > stop || nxt <= here) {
                bad[i] = 1;
                break;
            }
            if (nxt == stop)
                break;
            p = nxt;
        }
    }
    return 0;
}

static PyObject *or_none(PyObject *obj) {
    if (obj)
        return obj;
    Py_RETURN_NONE;
}

static PyObject *walk(PyObject *self, PyObject *args) {
    Py_buffer data, starts, ends;
    (void)self;
    PyObject *numbers;
    long long repeated;
    if (!PyArg_ParseTuple(args, "y*y*y*O!L", &data, &starts, &ends, &PyTuple_Type, &numbers,
                          &repeated))
        return NULL;
    Py_ssize_t ncols = PyTuple_GET_SIZE(numbers);
    Column cols[MAX_FIELDS];
    int8_t small[64];
    memset(cols, 0, sizeof cols);
    memset(small, -1, sizeof small);
    PyObject *result = NULL, *bad_o = NULL;
    Walker w = {0};
    w.lanes = starts.len / 8;
    if (ncols > MAX_FIELDS || starts.len != ends.len || starts.len % 8) {
        PyErr_SetString(PyExc_ValueError, "too many fields, or start and end differ in size");
        goto done;
    }
    for (Py_ssize_t k = 0; k < ncols; k++) {
        cols[k].number = PyLong_AsLongLong(PyTuple_GET_ITEM(numbers, k));
        if (cols[k].number == -1 && PyErr_Occurred())
            goto done;
        if (cols[k].number >= 0 && cols[k].number < 64)
            small[cols[k].number] = (int8_t)k;
    }
    if (!(bad_o = PyByteArray_FromStringAndSize(NULL, w.lanes)))
        goto done;
    uint8_t *bad = (uint8_t *)PyByteArray_AS_STRING(bad_o);
    memset(bad, 0, (size_t)w.lanes);
    w.released = PyEval_SaveThread();
    int status = walk_lanes(&w, data.buf, data.len, starts.buf, ends.buf, cols, ncols, small,
                            repeated, bad);
    PyEval_RestoreThread(w.released);
    if (status < 0)
        goto done;
    if (status > 0) {
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    for (int k = 0; k < 3; k++) {
        if (!w.row_o[k] && !(w.row_o[k] = PyByteArray_FromStringAndSize(NULL, 0)))
            goto done;
        if (PyByteArray_Resize(w.row_o[k], w.rows * 8) < 0)
            goto done;
    }
    PyObject *columns = PyTuple_New(ncols);
    if (!columns)
        goto done;
    for (Py_ssize_t k = 0; k < ncols; k++) {
        Column *c = &cols[k];
        PyObject *item;
        if (!c->wire_o) {
            item = Py_None;
            Py_INCREF(item);
        } else {
            item = PyTuple_Pack(4, c->wire_o, c->a_o, or_none(c->b_o), or_none(c->rep_o));
            if (!c->b_o)
                Py_DECREF(Py_None);
            if (!c->rep_o)
                Py_DECREF(Py_None);
            if (!item) {
                Py_DECREF(columns);
                goto done;
            }
        }
        PyTuple_SET_ITEM(columns, k, item);
    }
    result = PyTuple_Pack(5, bad_o, columns, w.row_o[0], w.row_o[1], w.row_o[2]);
    Py_DECREF(columns);
done:
    for (Py_ssize_t k = 0; k < MAX_FIELDS; k++) {
        Py_XDECREF(cols[k].wire_o);
        Py_XDECREF(cols[k].a_o);
        Py_XDECREF(cols[k].b_o);
        Py_XDECREF(cols[k].rep_o);
    }
    for (int k = 0; k < 3; k++)
        Py_XDECREF(w.row_o[k]);
    Py_XDECREF(bad_o);
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    return result;
}

/* A hash of n bytes at p, 8 bytes at a time (never reading past p + n). */
static inline uint64_t hash_bytes(const uint8_t *p, int64_t n) {
    uint64_t h = (uint64_t)n * 0x9E3779B97F4A7C15ULL;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        h = (h ^ word) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    if (n > 0) {
        uint64_t word = 0;
        memcpy(&word, p, (size_t)n);
        h = (h ^ word) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 31;
    }
    return h * 0x94D049BB133111EBULL;
}

typedef struct {
    uint64_t hash;
    int64_t first; /* index of the string's first span; -1: a free slot */
    uint32_t code;
} Slot;

/* Group the spans into codes and firsts (`groups` of them); 0, 1 when a span lies outside
 * the buffer, -1 when out of memory. */
static int group_spans(const uint8_t *buf, int64_t size, const int64_t *start,
                       const int64_t *length, Py_ssize_t n, uint32_t *codes, int64_t *firsts,
                       int64_t *groups) {
    for (Py_ssize_t i = 0; i < n; i++)
        if (start[i] < 0 || length[i] < 0 || start[i] > size || length[i] > size - start[i])
            return 1;
    size_t cap = 64, mask = cap - 1, used = 0;
    Slot *table = malloc(cap * sizeof(Slot));
    if (!table)
        return -1;
    for (size_t k = 0; k < cap; k++)
        table[k].first = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *p = buf + start[i];
        int64_t len = length[i];
        uint64_t h = hash_bytes(p, len);
        size_t k = (size_t)(h >> 7) & mask;
        for (;; k = (k + 1) & mask) {
            Slot *slot = &table[k];
            if (slot->first < 0) {
                slot->hash = h;
                slot->first = i;
                slot->code = (uint32_t)used;
                firsts[used++] = i;
                codes[i] = slot->code;
                break;
            }
            if (slot->hash == h && length[slot->first] == len
                && memcmp(buf + start[slot->first], p, (size_t)len) == 0) {
                codes[i] = slot->code;
                break;
            }
        }
        if (used * 2 > cap) { /* grow: rehash the strings seen */
            size_t bigger = cap * 4;
            Slot *grown = malloc(bigger * sizeof(Slot));
            if (!grown) {
                free(table);
                return -1;
            }
            for (size_t j = 0; j < bigger; j++)
                grown[j].first = -1;
            for (size_t j = 0; j < cap; j++) {
                if (table[j].first < 0)
                    continue;
                size_t at = (size_t)(table[j].hash >> 7) & (bigger - 1);
                while (grown[at].first >= 0)
                    at = (at + 1) & (bigger - 1);
                grown[at] = table[j];
            }
            free(table);
            table = grown;
            cap = bigger;
            mask = cap - 1;
        }
    }
    free(table);
    *groups = (int64_t)used;
    return 0;
}

static PyObject *group(PyObject *self, PyObject *args) {
    Py_buffer data, starts, lengths;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*", &data, &starts, &lengths))
        return NULL;
    PyObject *result = NULL, *codes = NULL, *firsts = NULL;
    Py_ssize_t n = starts.len / 8;
    if (starts.len != lengths.len || starts.len % 8) {
        PyErr_SetString(PyExc_ValueError, "start and length differ in size");
        goto done;
    }
    if (!(codes = PyByteArray_FromStringAndSize(NULL, n * 4))
        || !(firsts = PyByteArray_FromStringAndSize(NULL, n * 8)))
        goto done;
    int64_t groups = 0;
    int status;
    Py_BEGIN_ALLOW_THREADS
    status = group_spans(data.buf, data.len, starts.buf, lengths.buf, n,
                         (uint32_t *)PyByteArray_AS_STRING(codes),
                         (int64_t *)PyByteArray_AS_STRING(firsts), &groups);
    Py_END_ALLOW_THREADS
    if (status < 0) {
        PyErr_NoMemory();
    } else if (status > 0) {
        result = Py_None;
        Py_INCREF(result);
    } else if (PyByteArray_Resize(firsts, (Py_ssize_t)groups * 8) == 0) {
        result = PyTuple_Pack(2, codes, firsts);
    }
done:
    Py_XDECREF(codes);
    Py_XDECREF(firsts);
    PyBuffer_Release(&data);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&lengths);
    return result;
}

/* -- CRC-32C and TFRecord chains ------------------------------------------------------- */

static uint32_t crc_table[256];

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

static uint32_t crc_soft(uint32_t crc, const uint8_t *p, size_t n) {
    for (; n; n--, p++)
        crc = crc_table[(crc ^ *p) & 0xFF] ^ (crc >> 8);
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p,
                                                          size_t n) {
    uint64_t c = crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        c = __builtin_ia32_crc32di(c, word);
    }
    crc = (uint32_t)c;
    for (; n; n--, p++)
        crc = __builtin_ia32_crc32qi(crc, *p);
    return crc;
}
#endif

static int hw_crc;

/* The standard CRC-32C of n bytes. */
static uint32_t crc32c(const uint8_t *p, size_t n) {
#ifdef HAVE_HW_CRC
    if (hw_crc)
        return ~crc_hw(0xFFFFFFFFu, p, n);
#endif
    return ~crc_soft(0xFFFFFFFFu, p, n);
}

static inline uint32_t masked(uint32_t crc) {
    return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

static inline uint32_t u32_at(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t u64_at(const uint8_t *p) {
    return (uint64_t)u32_at(p) | (uint64_t)u32_at(p + 4) << 32;
}

typedef struct {
    int64_t *heads, *lens;
    uint8_t *good;
    Py_ssize_t count, cap;
} Chain;

/* Follow the chain from pos into c; *stop and *garbage as chain() returns them. */
static int follow(const uint8_t *buf, int64_t n, int64_t pos, Chain *c, int64_t *stop,
                  int64_t *garbage) {
    *garbage = -1;
    while (pos + 12 <= n) {
        uint64_t length = u64_at(buf + pos);
        if (n - pos - 16 < 0 || length > (uint64_t)(n - pos - 16))
            break;
        if (masked(crc32c(buf + pos, 8)) != u32_at(buf + pos + 8)) {
            *garbage = pos;
            break;
        }
        if (c->count == c->cap) {
            Py_ssize_t cap = c->cap ? c->cap * 2 : 4096;
            int64_t *heads = realloc(c->heads, (size_t)cap * 8);
            if (heads)
                c->heads = heads;
            int64_t *lens = realloc(c->lens, (size_t)cap * 8);
            if (lens)
                c->lens = lens;
            uint8_t *good = realloc(c->good, (size_t)cap);
            if (good)
                c->good = good;
            if (!heads || !lens || !good)
                return -1;
            c->cap = cap;
        }
        const uint8_t *data = buf + pos + 12;
        c->heads[c->count] = pos;
        c->lens[c->count] = (int64_t)length;
        c->good[c->count] = masked(crc32c(data, (size_t)length)) == u32_at(data + length);
        c->count++;
        pos += (int64_t)length + 16;
    }
    *stop = pos;
    return 0;
}

static PyObject *chain(PyObject *self, PyObject *args) {
    Py_buffer data;
    long long pos;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*L", &data, &pos))
        return NULL;
    Chain c = {0};
    int64_t stop = pos, garbage = -1;
    int status = 0;
    if (pos >= 0) {
        Py_BEGIN_ALLOW_THREADS
        status = follow(data.buf, data.len, pos, &c, &stop, &garbage);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&data);
    PyObject *result = NULL;
    if (status < 0)
        PyErr_NoMemory();
    else
        result = Py_BuildValue("y#y#y#LL", c.count ? (char *)c.heads : "", c.count * 8,
                               c.count ? (char *)c.lens : "", c.count * 8,
                               c.count ? (char *)c.good : "", c.count, (long long)stop,
                               (long long)garbage);
    free(c.heads);
    free(c.lens);
    free(c.good);
    return result;
}

static PyObject *crc(PyObject *self, PyObject *args) {
    Py_buffer data;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &data))
        return NULL;
    uint32_t value = crc32c(data.buf, (size_t)data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(value);
}

static PyMethodDef methods[] = {
    {"chain", chain, METH_VARARGS,
     "chain(buf, pos) -> (heads, lengths, good, stop, garbage): the checked TFRecord chain"},
    {"crc32c", crc, METH_VARARGS, "crc32c(data) -> the standard CRC-32C of data"},
    {"group", group, METH_VARARGS,
     "group(buf, start, length) -> (codes, first), or None when a span lies outside buf"},
    {"walk", walk, METH_VARARGS,
     "walk(buf, start, end, numbers, repeated) -> (bad, columns, rows_lane, rows_start, "
     "rows_length), or None when a lane lies outside buf"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_wire",
                                    "Protobuf messages walked field by field, many at once "
                                    "(see runcompare.sources.codecs.protowire.walk).",
                                    -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__wire(void) {
    crc_init();
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    hw_crc = !!__builtin_cpu_supports("sse4.2");
#endif
    PyObject *m = PyModule_Create(&module);
    if (m && PyModule_AddIntConstant(m, "FAST_CRC", hw_crc) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
