/* Rows of an Arrow record batch gathered into new buffers, through the Arrow C Data Interface.
 *
 * Why C, and why this way: flight_server/gather.py says it (and docs/ARCHITECTURE.md, Libraries).
 * In short: pyarrow.compute's take costs ~4 us of dispatch per column and runs without the GIL,
 * so under load a statistics answer (10 rows of ~32 columns) waited to get the GIL back. Here
 * the gather is plain loops over the buffers, done with the GIL held (microseconds).
 *
 * Nothing here links to libarrow: the structs below are the C Data Interface's, a stable ABI
 * (https://arrow.apache.org/docs/format/CDataInterface.html), exchanged with pyarrow as
 * PyCapsules ("arrow_schema", "arrow_array": __arrow_c_array__) and a struct address
 * (pa.RecordBatch._import_from_c).
 *
 * Gatherer(schema_capsule, array_capsule): takes the exported batch (moved out of the array
 * capsule, released when the Gatherer dies); TypeError for a type it does not gather.
 * Gatherer.take(rows) -> (capsule, address): a new struct array of len(rows) rows, the rows at
 * those positions (repeats allowed, in order); IndexError outside [0, num_rows). The capsule
 * owns the new ArrowArray (released and freed with the capsule unless pyarrow moved it out).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------ the C Data Interface (ABI) */
#define ARROW_FLAG_DICTIONARY_ORDERED 1
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

/* ------------------------------------------------------------ column kinds */
enum kind { K_NULL, K_BOOL, K_FIXED, K_BINARY32, K_BINARY64 };

typedef struct {
    enum kind kind;
    int64_t width;  /* bytes per value (K_FIXED) */
} Column;

/* The kind of one child's format string, or -1: not gathered here. */
static int column_of(const struct ArrowSchema *s, Column *out) {
    const char *f = s->format;
    if (f == NULL || s->dictionary != NULL || s->n_children != 0) return -1;
    out->width = 0;
    if (f[0] != '\0' && f[1] == '\0') {
        switch (f[0]) {
        case 'n': out->kind = K_NULL; return 0;
        case 'b': out->kind = K_BOOL; return 0;
        case 'c': case 'C': out->width = 1; break;
        case 's': case 'S': case 'e': out->width = 2; break;
        case 'i': case 'I': case 'f': out->width = 4; break;
        case 'l': case 'L': case 'g': out->width = 8; break;
        case 'u': case 'z': out->kind = K_BINARY32; return 0;
        case 'U': case 'Z': out->kind = K_BINARY64; return 0;
        default: return -1;
        }
        out->kind = K_FIXED;
        return 0;
    }
    out->kind = K_FIXED;
    if (f[0] == 't') {
        /* dates, times, timestamps, durations, intervals */
        if (strcmp(f, "tdD") == 0 || strcmp(f, "tts") == 0 || strcmp(f, "ttm") == 0 || strcmp(f, "tiM") == 0) {
            out->width = 4;
            return 0;
        }
        if (strcmp(f, "tdm") == 0 || strcmp(f, "ttu") == 0 || strcmp(f, "ttn") == 0 || strcmp(f, "tiD") == 0 ||
            (f[1] == 'D' && f[2] != '\0' && strchr("smun", f[2]) && f[3] == '\0') ||
            (f[1] == 's' && f[2] != '\0' && strchr("smun", f[2]) && f[3] == ':')) {
            out->width = 8;
            return 0;
        }
        if (strcmp(f, "tin") == 0) {
            out->width = 16;
            return 0;
        }
        return -1;
    }
    if (f[0] == 'w' && f[1] == ':') {
        char *end;
        long n = strtol(f + 2, &end, 10);
        if (*end != '\0' || n <= 0) return -1;
        out->width = n;
        return 0;
    }
    if (f[0] == 'd' && f[1] == ':') {
        /* d:P,S or d:P,S,BITWIDTH */
        const char *comma = strchr(f + 2, ',');
        if (comma == NULL) return -1;
        const char *bits = strchr(comma + 1, ',');
        long b = 128;
        if (bits != NULL) {
            char *end;
            b = strtol(bits + 1, &end, 10);
            if (*end != '\0') return -1;
        }
        if (b != 32 && b != 64 && b != 128 && b != 256) return -1;
        out->width = b / 8;
        return 0;
    }
    return -1;
}

static int64_t buffers_of(enum kind k) {
    switch (k) {
    case K_NULL: return 0;
    case K_BOOL: case K_FIXED: return 2;
    default: return 3;
    }
}

/* ------------------------------------------------------------ the output's memory
 * Each child owns one malloc'd block (its buffer pointers, then its buffers, 64-byte aligned)
 * and has its own release, as the interface allows a consumer to move a child out and release
 * it alone. The parent's block holds the child structs and their pointers. */
#define ALIGN 64
#define UP(n) (((n) + (ALIGN - 1)) & ~(int64_t)(ALIGN - 1))

static void release_child(struct ArrowArray *a) {
    free(a->private_data);
    a->release = NULL;
}

static void release_parent(struct ArrowArray *a) {
    for (int64_t i = 0; i < a->n_children; i++) {
        struct ArrowArray *c = a->children[i];
        if (c->release != NULL) c->release(c);
    }
    free(a->private_data);
    a->release = NULL;
}

static inline int get_bit(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

/* Gathers ``n`` rows (already checked) of ``in`` (absolute offset ``base``) into ``out``.
 * -1 with a Python error set on failure (memory, offsets overflowing int32). */
static int gather_child(const Column *col, const struct ArrowArray *in, int64_t base, const int64_t *rows, int64_t n,
                        struct ArrowArray *out) {
    const uint8_t *valid = (in->null_count != 0 && in->n_buffers > 0) ? (const uint8_t *)in->buffers[0] : NULL;
    int64_t nb = buffers_of(col->kind);
    int64_t head = UP((int64_t)sizeof(void *) * 3);
    int64_t bitmap = valid != NULL ? UP((n + 7) / 8) : 0;
    int64_t data = 0, offsets = 0, total = 0;
    switch (col->kind) {
    case K_NULL: break;
    case K_BOOL: data = UP((n + 7) / 8); break;
    case K_FIXED: data = UP(n * col->width); break;
    case K_BINARY32: {
        const int32_t *off = (const int32_t *)in->buffers[1];
        for (int64_t i = 0; i < n; i++) total += (int64_t)off[base + rows[i] + 1] - off[base + rows[i]];
        if (total > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "gathered strings exceed 2 GiB (int32 offsets)");
            return -1;
        }
        offsets = UP((n + 1) * 4);
        data = UP(total > 0 ? total : 1);
        break;
    }
    case K_BINARY64: {
        const int64_t *off = (const int64_t *)in->buffers[1];
        for (int64_t i = 0; i < n; i++) total += off[base + rows[i] + 1] - off[base + rows[i]];
        offsets = UP((n + 1) * 8);
        data = UP(total > 0 ? total : 1);
        break;
    }
    }
    uint8_t *block = NULL;
    if (posix_memalign((void **)&block, ALIGN, (size_t)(head + bitmap + offsets + data)) != 0) {
        PyErr_NoMemory();
        return -1;
    }
    const void **bufs = (const void **)block;
    uint8_t *p = block + head;
    int64_t nulls = 0;
    bufs[0] = NULL;
    if (valid != NULL) {
        uint8_t *bits = p;
        memset(bits, 0, (size_t)bitmap);
        for (int64_t i = 0; i < n; i++) {
            if (get_bit(valid, base + rows[i]))
                bits[i >> 3] |= (uint8_t)(1u << (i & 7));
            else
                nulls++;
        }
        bufs[0] = nulls != 0 ? bits : NULL;
        p += bitmap;
    }
    switch (col->kind) {
    case K_NULL: nulls = n; break;
    case K_BOOL: {
        const uint8_t *src = (const uint8_t *)in->buffers[1];
        memset(p, 0, (size_t)data);
        for (int64_t i = 0; i < n; i++)
            if (get_bit(src, base + rows[i])) p[i >> 3] |= (uint8_t)(1u << (i & 7));
        bufs[1] = p;
        break;
    }
    case K_FIXED: {
        const uint8_t *src = (const uint8_t *)in->buffers[1];
        int64_t w = col->width;
        switch (w) {
        case 8:
            for (int64_t i = 0; i < n; i++) memcpy(p + i * 8, src + (base + rows[i]) * 8, 8);
            break;
        case 4:
            for (int64_t i = 0; i < n; i++) memcpy(p + i * 4, src + (base + rows[i]) * 4, 4);
            break;
        default:
            for (int64_t i = 0; i < n; i++) memcpy(p + i * w, src + (base + rows[i]) * w, (size_t)w);
        }
        bufs[1] = p;
        break;
    }
    case K_BINARY32: {
        const int32_t *off = (const int32_t *)in->buffers[1];
        const uint8_t *src = (const uint8_t *)in->buffers[2];
        int32_t *o = (int32_t *)p;
        uint8_t *d = p + offsets;
        int32_t at = 0;
        o[0] = 0;
        for (int64_t i = 0; i < n; i++) {
            int32_t s = off[base + rows[i]], len = off[base + rows[i] + 1] - s;
            if (len > 0) memcpy(d + at, src + s, (size_t)len);
            at += len;
            o[i + 1] = at;
        }
        bufs[1] = o;
        bufs[2] = d;
        break;
    }
    case K_BINARY64: {
        const int64_t *off = (const int64_t *)in->buffers[1];
        const uint8_t *src = (const uint8_t *)in->buffers[2];
        int64_t *o = (int64_t *)p;
        uint8_t *d = p + offsets;
        int64_t at = 0;
        o[0] = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t s = off[base + rows[i]], len = off[base + rows[i] + 1] - s;
            if (len > 0) memcpy(d + at, src + s, (size_t)len);
            at += len;
            o[i + 1] = at;
        }
        bufs[1] = o;
        bufs[2] = d;
        break;
    }
    }
    out->length = n;
    out->null_count = nulls;
    out->offset = 0;
    out->n_buffers = nb;
    out->n_children = 0;
    out->buffers = bufs;
    out->children = NULL;
    out->dictionary = NULL;
    out->release = release_child;
    out->private_data = block;
    return 0;
}

/* ------------------------------------------------------------ Gatherer */
typedef struct {
    PyObject_HEAD
    struct ArrowArray batch;  /* moved out of the capsule; released in dealloc */
    Column *columns;
    int64_t n_columns;
} Gatherer;

/* The new array's capsule: releases it unless pyarrow moved it out (release NULL), frees the struct. */
static void array_capsule_free(PyObject *capsule) {
    struct ArrowArray *a = (struct ArrowArray *)PyCapsule_GetPointer(capsule, "arrow_array");
    if (a == NULL) {
        PyErr_Clear();
        return;
    }
    if (a->release != NULL) a->release(a);
    free(a);
}

static void Gatherer_dealloc(Gatherer *self) {
    if (self->batch.release != NULL) self->batch.release(&self->batch);
    PyMem_Free(self->columns);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Gatherer_init(Gatherer *self, PyObject *args, PyObject *kwds) {
    PyObject *schema_capsule, *array_capsule;
    static char *keywords[] = {"schema_capsule", "array_capsule", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OO:Gatherer", keywords, &schema_capsule, &array_capsule)) return -1;
    if (self->batch.release != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Gatherer is initialized once");
        return -1;
    }
    struct ArrowSchema *schema = (struct ArrowSchema *)PyCapsule_GetPointer(schema_capsule, "arrow_schema");
    if (schema == NULL) return -1;
    struct ArrowArray *array = (struct ArrowArray *)PyCapsule_GetPointer(array_capsule, "arrow_array");
    if (array == NULL) return -1;
    if (schema->release == NULL || array->release == NULL) {
        PyErr_SetString(PyExc_ValueError, "released ArrowSchema or ArrowArray");
        return -1;
    }
    if (schema->format == NULL || strcmp(schema->format, "+s") != 0 || array->n_children != schema->n_children ||
        array->null_count != 0 || array->n_children < 0) {
        PyErr_SetString(PyExc_TypeError, "not a record batch (a struct array without nulls)");
        return -1;
    }
    int64_t n = schema->n_children;
    Column *columns = PyMem_Calloc((size_t)(n > 0 ? n : 1), sizeof(Column));
    if (columns == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (int64_t i = 0; i < n; i++) {
        const struct ArrowArray *c = array->children[i];
        if (column_of(schema->children[i], &columns[i]) != 0 || c->n_children != 0 || c->dictionary != NULL ||
            c->n_buffers != buffers_of(columns[i].kind) || c->length < array->offset + array->length) {
            PyErr_Format(PyExc_TypeError, "column %lld (format %s) is not gathered here", (long long)i,
                         schema->children[i]->format ? schema->children[i]->format : "?");
            PyMem_Free(columns);
            return -1;
        }
    }
    self->batch = *array;  /* moved: the capsule's destructor sees a released array */
    array->release = NULL;
    self->columns = columns;
    self->n_columns = n;
    return 0;
}

static PyObject *Gatherer_take(Gatherer *self, PyObject *arg) {
    if (self->batch.release == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Gatherer not initialized");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(arg, "rows: a list of ints");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    int64_t *rows = PyMem_Malloc(sizeof(int64_t) * (size_t)(n > 0 ? n : 1));
    if (rows == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    int64_t length = self->batch.length;
    for (Py_ssize_t i = 0; i < n; i++) {
        long long r = PyLong_AsLongLong(items[i]);
        if (r == -1 && PyErr_Occurred()) goto fail;
        if (r < 0 || r >= length) {
            PyErr_Format(PyExc_IndexError, "row %lld out of range for %lld rows", r, (long long)length);
            goto fail;
        }
        rows[i] = (int64_t)r;
    }
    Py_CLEAR(seq);

    int64_t nc = self->n_columns;
    /* the parent: its struct (in the capsule), its block: [buffers (1)] [child pointers] [child structs] */
    struct ArrowArray *out = calloc(1, sizeof(struct ArrowArray));
    size_t size = sizeof(void *) + (size_t)nc * (sizeof(struct ArrowArray *) + sizeof(struct ArrowArray));
    uint8_t *block = calloc(1, size);
    if (out == NULL || block == NULL) {
        free(out);
        free(block);
        PyErr_NoMemory();
        goto fail;
    }
    const void **bufs = (const void **)block;
    struct ArrowArray **children = (struct ArrowArray **)(block + sizeof(void *));
    struct ArrowArray *structs = (struct ArrowArray *)(block + sizeof(void *) + (size_t)nc * sizeof(struct ArrowArray *));
    bufs[0] = NULL;
    out->length = n;
    out->null_count = 0;
    out->offset = 0;
    out->n_buffers = 1;
    out->n_children = nc;
    out->buffers = bufs;
    out->children = children;
    out->dictionary = NULL;
    out->release = release_parent;
    out->private_data = block;
    for (int64_t i = 0; i < nc; i++) children[i] = &structs[i];  /* release NULL until gathered */
    for (int64_t i = 0; i < nc; i++) {
        const struct ArrowArray *in = self->batch.children[i];
        if (gather_child(&self->columns[i], in, in->offset + self->batch.offset, rows, n, &structs[i]) != 0) {
            release_parent(out);
            free(out);
            goto fail;
        }
    }
    PyMem_Free(rows);
    PyObject *capsule = PyCapsule_New(out, "arrow_array", array_capsule_free);
    if (capsule == NULL) {
        release_parent(out);
        free(out);
        return NULL;
    }
    PyObject *address = PyLong_FromVoidPtr(out);
    if (address == NULL) {
        Py_DECREF(capsule);
        return NULL;
    }
    PyObject *result = PyTuple_Pack(2, capsule, address);
    Py_DECREF(capsule);
    Py_DECREF(address);
    return result;
fail:
    Py_XDECREF(seq);
    PyMem_Free(rows);
    return NULL;
}

static PyObject *Gatherer_num_rows(Gatherer *self, void *closure) {
    (void)closure;
    return PyLong_FromLongLong(self->batch.release != NULL ? self->batch.length : 0);
}

static PyMethodDef Gatherer_methods[] = {
    {"take", (PyCFunction)Gatherer_take, METH_O,
     "take(rows) -> (capsule, address): the rows at ``rows`` as a new ArrowArray (a struct array)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef Gatherer_getset[] = {
    {"num_rows", (getter)Gatherer_num_rows, NULL, "rows of the batch", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject GathererType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "flight_server._gather.Gatherer",
    .tp_basicsize = sizeof(Gatherer),
    .tp_dealloc = (destructor)Gatherer_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Gatherer(schema_capsule, array_capsule): gathers rows of an exported record batch.",
    .tp_methods = Gatherer_methods,
    .tp_getset = Gatherer_getset,
    .tp_init = (initproc)Gatherer_init,
    .tp_new = PyType_GenericNew,
};

static struct PyModuleDef gather_module = {
    PyModuleDef_HEAD_INIT, .m_name = "flight_server._gather",
    .m_doc = "Rows of an Arrow record batch gathered through the C Data Interface (flight_server/gather.py).",
    .m_size = -1,
};

PyMODINIT_FUNC PyInit__gather(void) {
    if (PyType_Ready(&GathererType) < 0) return NULL;
    PyObject *m = PyModule_Create(&gather_module);
    if (m == NULL) return NULL;
    Py_INCREF(&GathererType);
    if (PyModule_AddObject(m, "Gatherer", (PyObject *)&GathererType) < 0) {
        Py_DECREF(&GathererType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
