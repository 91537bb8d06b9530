/* Rows of an Arrow record batch gathered into new buffers, through the Arrow C Data Interface.
 *
 * Why C, and why this way: flight_server/gather.py says it (and docs/ARCHITECTURE.md, Libraries).
 * In short: pyarrow.compute's take costs ~4 us of dispatch per column and runs without the GIL,
 * so under load a statistics answer (10 rows of ~32 columns) waited to get the GIL back. Here
 * the gather is plain loops over the buffers, done with the GIL held (microseconds).
 *
 * Nothing here links to libarrow: the structs below are the C Data Interface's, a stable ABI
 * (https://arrow.apache.org/docs/format/CDataInterface.html), exchanged with pyarrow as
 * PyCapsules ("arrow_schema", "arrow_array": __arrow_c_array__) and a struct's address
 * (pa.RecordBatch._import_from_c: no schema to import again per call).
 *
 * Gatherer(schema_capsule, array_capsule, importer, schema): takes the exported batch (moved
 * out of the array capsule, released when the Gatherer dies); TypeError for a type it does not
 * gather. Gatherer.take(rows): a new struct array of len(rows) rows, the rows at those
 * positions (repeats allowed, in order; IndexError outside [0, num_rows)), handed to
 * importer(address, schema) (pa.RecordBatch._import_from_c, which moves it out of the struct)
 * and its result returned; the struct is freed (and released if the import failed) here.
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
 * One malloc'd block per answer: a reference count, the parent's buffer and child pointers,
 * the child structs, then each child's buffers (64-byte aligned). The parent and every child
 * hold a reference and have their own release (the interface lets a consumer move a child out
 * and release it alone; releases may run on any thread, without the GIL: atomic count). */
#define ALIGN 64
#define UP(n) (((n) + (ALIGN - 1)) & ~(int64_t)(ALIGN - 1))

typedef struct {
    int64_t refs;
    void *allocated;  /* what malloc returned (the block starts at the next 64-byte boundary) */
} Shared;

static void drop(Shared *h) {
    if (__atomic_sub_fetch(&h->refs, 1, __ATOMIC_ACQ_REL) == 0) free(h->allocated);
}

static void release_child(struct ArrowArray *a) {
    Shared *h = (Shared *)a->private_data;
    a->release = NULL;  /* before the drop: ``a`` may live in the block */
    drop(h);
}

static void release_parent(struct ArrowArray *a) {
    for (int64_t i = 0; i < a->n_children; i++) {
        struct ArrowArray *c = a->children[i];
        if (c->release != NULL) c->release(c);
    }
    Shared *h = (Shared *)a->private_data;
    a->release = NULL;
    drop(h);
}

static inline int get_bit(const uint8_t *bits, int64_t i) { return (bits[i >> 3] >> (i & 7)) & 1; }

static const uint8_t *validity_of(const struct ArrowArray *in) {
    return (in->null_count != 0 && in->n_buffers > 0) ? (const uint8_t *)in->buffers[0] : NULL;
}

/* Bytes a child's buffers take for ``n`` rows (already checked) of ``in`` (absolute offset
 * ``base``), and in ``*total`` its value bytes (strings); -1 with a Python error set when the
 * strings overflow int32 offsets. */
static int64_t child_bytes(const Column *col, const struct ArrowArray *in, int64_t base, const int64_t *rows, int64_t n,
                           int64_t *total) {
    int64_t bytes = UP((int64_t)sizeof(void *) * 3) + (validity_of(in) != NULL ? UP((n + 7) / 8) : 0);
    int64_t t = 0;
    switch (col->kind) {
    case K_NULL: break;
    case K_BOOL: bytes += UP((n + 7) / 8); break;
    case K_FIXED: bytes += UP(n * col->width); break;
    case K_BINARY32: {
        const int32_t *off = (const int32_t *)in->buffers[1];
        for (int64_t i = 0; i < n; i++) t += (int64_t)off[base + rows[i] + 1] - off[base + rows[i]];
        if (t > INT32_MAX) {
            PyErr_SetString(PyExc_OverflowError, "gathered strings exceed 2 GiB (int32 offsets)");
            return -1;
        }
        bytes += UP((n + 1) * 4) + UP(t);
        break;
    }
    case K_BINARY64: {
        const int64_t *off = (const int64_t *)in->buffers[1];
        for (int64_t i = 0; i < n; i++) t += off[base + rows[i] + 1] - off[base + rows[i]];
        bytes += UP((n + 1) * 8) + UP(t);
        break;
    }
    }
    *total = t;
    return bytes;
}

/* Gathers the rows into ``block`` (child_bytes of it) and describes them in ``out``. */
static void gather_child(const Column *col, const struct ArrowArray *in, int64_t base, const int64_t *rows, int64_t n,
                         uint8_t *block, Shared *shared, struct ArrowArray *out) {
    const uint8_t *valid = validity_of(in);
    const void **bufs = (const void **)block;
    uint8_t *p = block + UP((int64_t)sizeof(void *) * 3);
    int64_t nulls = 0;
    bufs[0] = NULL;
    if (valid != NULL) {
        int64_t bitmap = UP((n + 7) / 8);
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
        memset(p, 0, (size_t)UP((n + 7) / 8));
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
        uint8_t *d = p + UP((n + 1) * 4);
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
        uint8_t *d = p + UP((n + 1) * 8);
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
    out->n_buffers = buffers_of(col->kind);
    out->n_children = 0;
    out->buffers = bufs;
    out->children = NULL;
    out->dictionary = NULL;
    out->release = release_child;
    out->private_data = shared;
}

/* ------------------------------------------------------------ Gatherer */
typedef struct {
    PyObject_HEAD
    struct ArrowArray batch;  /* moved out of the capsule; released in dealloc */
    Column *columns;
    int64_t n_columns;
    PyObject *importer;  /* importer(address, schema) -> the batch (pa.RecordBatch._import_from_c) */
    PyObject *schema;    /* the pa.Schema of the batch, given to the importer */
} Gatherer;

static void Gatherer_dealloc(Gatherer *self) {
    if (self->batch.release != NULL) self->batch.release(&self->batch);
    PyMem_Free(self->columns);
    Py_XDECREF(self->importer);
    Py_XDECREF(self->schema);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Gatherer_init(Gatherer *self, PyObject *args, PyObject *kwds) {
    PyObject *schema_capsule, *array_capsule, *importer, *schema_object;
    static char *keywords[] = {"schema_capsule", "array_capsule", "importer", "schema", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOO:Gatherer", keywords, &schema_capsule, &array_capsule, &importer,
                                     &schema_object))
        return -1;
    if (!PyCallable_Check(importer)) {
        PyErr_SetString(PyExc_TypeError, "importer: a callable (address, schema) -> record batch");
        return -1;
    }
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
    Py_INCREF(importer);
    self->importer = importer;
    Py_INCREF(schema_object);
    self->schema = schema_object;
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
    int64_t *rows = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + self->n_columns + 1));  /* and the sizes */
    if (rows == NULL) {
        Py_DECREF(seq);
        return PyErr_NoMemory();
    }
    int64_t length = self->batch.length;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (!PyLong_CheckExact(items[i])) {  /* no __index__: no Python code may change the list meanwhile */
            PyErr_SetString(PyExc_TypeError, "rows: a list of ints");
            goto fail;
        }
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
    int64_t *sizes = rows + n;  /* child_bytes of each column */
    int64_t head = UP((int64_t)sizeof(Shared)) +
                   UP((int64_t)(sizeof(void *) + (size_t)nc * (sizeof(struct ArrowArray *) + sizeof(struct ArrowArray))));
    int64_t size = head;
    for (int64_t i = 0; i < nc; i++) {
        const struct ArrowArray *in = self->batch.children[i];
        int64_t total;
        sizes[i] = child_bytes(&self->columns[i], in, in->offset + self->batch.offset, rows, n, &total);
        if (sizes[i] < 0) goto fail;
        size += sizes[i];
    }
    /* the parent's struct: malloc'd apart (pyarrow moves it out; freed here after the import) */
    struct ArrowArray *out = malloc(sizeof(struct ArrowArray));
    void *allocated = malloc((size_t)(size + ALIGN)); /* plain malloc: posix_memalign cost ~10k instructions here */
    if (out == NULL || allocated == NULL) {
        free(out);
        free(allocated);
        PyErr_NoMemory();
        goto fail;
    }
    uint8_t *block = (uint8_t *)(((uintptr_t)allocated + (ALIGN - 1)) & ~(uintptr_t)(ALIGN - 1));
    Shared *shared = (Shared *)block;
    shared->refs = 1 + nc;
    shared->allocated = allocated;
    const void **bufs = (const void **)(block + UP((int64_t)sizeof(Shared)));
    struct ArrowArray **children = (struct ArrowArray **)(bufs + 1);
    struct ArrowArray *structs = (struct ArrowArray *)(children + nc);
    bufs[0] = NULL;
    uint8_t *at = block + head;
    for (int64_t i = 0; i < nc; i++) {
        const struct ArrowArray *in = self->batch.children[i];
        children[i] = &structs[i];
        gather_child(&self->columns[i], in, in->offset + self->batch.offset, rows, n, at, shared, &structs[i]);
        at += sizes[i];
    }
    out->length = n;
    out->null_count = 0;
    out->offset = 0;
    out->n_buffers = 1;
    out->n_children = nc;
    out->buffers = bufs;
    out->children = children;
    out->dictionary = NULL;
    out->release = release_parent;
    out->private_data = shared;
    PyMem_Free(rows);
    PyObject *address = PyLong_FromVoidPtr(out);
    PyObject *batch = address == NULL ? NULL : PyObject_CallFunctionObjArgs(self->importer, address, self->schema, NULL);
    Py_XDECREF(address);
    if (out->release != NULL) out->release(out);  /* not moved out: the import failed */
    free(out);
    return batch;
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
     "take(rows) -> importer(address, schema): the rows at ``rows`` imported from a new ArrowArray."},
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
    .tp_doc = "Gatherer(schema_capsule, array_capsule, importer, schema): gathers rows of an exported record batch.",
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
