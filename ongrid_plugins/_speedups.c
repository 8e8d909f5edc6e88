/* Compiled helpers for what every call does between two spawns: canonical JSON, SHA-256,
 * the audit row and the journal's append, and the value objects it builds.
 *
 * canonical_encoder(fallback) returns a function that gives the canonical JSON text of
 * a value (sorted keys, no spaces, UTF-8 kept, no NaN): byte for byte what
 * json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
 * allow_nan=False).encode gives, for the values it knows, read as json reads them:
 *
 *   None, True, False;
 *   int and its subclasses (int.__repr__: an IntEnum is its number);
 *   float and its subclasses, when finite (float.__repr__);
 *   str and its subclasses (their characters: a StrEnum is its value), escaped as
 *     json escapes them with ensure_ascii=False (", \, \b \f \n \r \t, other control
 *     characters as \u00xx, everything else kept);
 *   dict (exactly) whose keys are all str (exactly), in sorted key order;
 *   list and tuple (exactly);
 *
 * nested up to MAX_DEPTH. Anything else anywhere in the value -- another type, a
 * subclass of dict, list or tuple, a key that is not a str, a NaN or an infinity, a
 * lone surrogate, deeper nesting or a cycle, an int too long for int.__repr__ -- hands
 * the whole value to fallback(value), the Python encoder, which gives the text or the
 * error json gives. Nothing here runs Python code or releases the GIL, so the value
 * cannot change while it is read.
 *
 * Why: json's C encoder spends most of a small value's time on its generality (a list
 * of chunks joined at the end, a new str object for every string it escapes, a markers
 * dict for cycles); an audit row, a call's arguments and its result are encoded on
 * every call. Here every piece goes into one buffer, sized as it goes.
 *
 * write_all(fd, data) writes all of data with the GIL held (os.write releases and takes
 * it back around every write, a hand-over to any thread waiting for it and a wait to
 * get it back: more than the append of a line to a local file costs). For the journal,
 * a local file, never a pipe or a socket that could block.
 *
 * same_files(stamps) and same_mtimes(stamps) tell whether paths still name what they
 * named when a cached sandbox grant or cover was made (executors/confine/stamps.py):
 * every confined call checks ~20 paths between two spawns, where os.stat's result
 * objects, and the exception an absent path raises, cost more than the system calls.
 *
 * light(args, budget) is schema.arguments' walk over a call's arguments (is the check
 * certainly cheap enough to run on an event loop?) for the plain JSON values a call's
 * arguments nearly always are: every acall asks it, where the Python walk costs about a
 * hundred bytecodes for even a flat dict of a few strings.
 *
 * slot_builder(cls, names, fields) is models.fastinit's builder of a frozen slotted
 * class: object.__new__(cls), then each field's value set through its slot's own
 * descriptor, in field order. fields holds, per field, (descriptor, kind, payload,
 * converter): kind ARG takes the argument at index payload, CONSTANT the default
 * payload, FACTORY calls payload(); a converter that is not None is called on the value
 * before it is set. Every call builds four such values (the request, the spec, the
 * runner's outcome, the result), and a load one or two per skill: the generated Python
 * function costs 55-90 bytecodes a value, this a C loop.
 *
 * sha256_hex(data) is hashlib.sha256(data).hexdigest() for a bytes or a str (its UTF-8,
 * as str.encode gives it): every call hashes its arguments and its result, and the audit
 * writer every row. OpenSSL's EVP path, fetched and set up for each digest, cost ~15 us
 * between two spawns where the hashing itself is a fraction of a microsecond; this is
 * FIPS 180-4 in a few lines, and releases the GIL for data of 64 KiB or more.
 *
 * audit_starter(fallback, names) and audit_finisher(fallback) give audit.rows' start
 * head and finished row in C for the common call (no secret to redact, no error, stderr,
 * remote run or approvers): the values and texts the Python functions make, byte for
 * byte, or None, and the Python function makes that row (tests/test_audit_rows_c.py).
 *
 * schema_walker(config) and unique_object(pairs) are for a load, which reads every
 * manifest: schema.metaschema's walk of a tool's schema against the metaschema (its
 * commonest rules checked in C, the others called), and the manifest parser's
 * duplicate-key hook, called for every JSON object (tests/test_schema_walk_c.py).
 * manifest_fields(config) gives the skill.json loader's field checks for the plain
 * manifest, or None where a field needs the Python checks' words
 * (tests/test_manifest_fields_c.py), and list_folder the loader's listing of a folder
 * (tests/test_loader.py).
 *
 * Optional: where it is not built (see hatch_build.py), models.base, models.fastinit,
 * audit.rows, audit.journal, executors.confine.stamps, schema.arguments,
 * schema.metaschema, loaders.skill_json_parse, loaders.skill_json and loader use their
 * Python code, which gives the same results.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_DEPTH 64

typedef struct {
    char *data;
    size_t len, cap;
    char small[1024];
    int ascii; /* every byte < 0x80 so far */
} Out;

static int out_grow(Out *o, size_t more) {
    size_t need = o->len + more;
    if (need <= o->cap)
        return 0;
    size_t cap = o->cap * 2; /* doubling for many small pieces, exact for one large one */
    if (cap < need)
        cap = need;
    char *data;
    if (o->data == o->small) {
        data = PyMem_Malloc(cap);
        if (data != NULL)
            memcpy(data, o->small, o->len);
    } else {
        data = PyMem_Realloc(o->data, cap);
    }
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    o->data = data;
    o->cap = cap;
    return 0;
}

static inline int out_put(Out *o, const char *s, size_t n) {
    if (out_grow(o, n) < 0)
        return -1;
    memcpy(o->data + o->len, s, n);
    o->len += n;
    return 0;
}

static inline int out_char(Out *o, char c) {
    if (o->len == o->cap && out_grow(o, 1) < 0)
        return -1;
    o->data[o->len++] = c;
    return 0;
}

/* What each byte becomes in a JSON string, in bytes: 1 for itself, 2 for the escapes
 * json writes short (\" \\ \b \f \n \r \t), 6 for the other control characters (\u00xx),
 * as json escapes with ensure_ascii=False. A byte of a multi-byte UTF-8 sequence is
 * >= 0x80 and never escaped. */
static unsigned char ESCAPED_LEN[256];

static void init_escape(void) {
    for (int c = 0; c < 256; c++)
        ESCAPED_LEN[c] = c < 0x20 ? 6 : 1;
    ESCAPED_LEN['"'] = ESCAPED_LEN['\\'] = ESCAPED_LEN['\b'] = ESCAPED_LEN['\f'] = 2;
    ESCAPED_LEN['\n'] = ESCAPED_LEN['\r'] = ESCAPED_LEN['\t'] = 2;
}

/* A str as a JSON string. -1 with an exception set (a lone surrogate: no UTF-8). */
static int put_str(Out *o, PyObject *s) {
    Py_ssize_t n;
    const char *utf8;
#if PY_VERSION_HEX < 0x030C0000
    if (PyUnicode_READY(s) < 0) /* a legacy string (3.11) */
        return -1;
#endif
    if (PyUnicode_IS_ASCII(s)) {
        utf8 = (const char *)PyUnicode_DATA(s);
        n = PyUnicode_GET_LENGTH(s);
    } else {
        utf8 = PyUnicode_AsUTF8AndSize(s, &n);
        if (utf8 == NULL)
            return -1;
        o->ascii = 0;
    }
    size_t size = 2; /* its exact size first: one reservation, never six times the text */
    for (Py_ssize_t i = 0; i < n; i++)
        size += ESCAPED_LEN[(unsigned char)utf8[i]];
    if (out_grow(o, size) < 0)
        return -1;
    char *w = o->data + o->len;
    *w++ = '"';
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (ESCAPED_LEN[c] == 1) {
            *w++ = (char)c;
            continue;
        }
        *w++ = '\\';
        switch (c) {
        case '"': *w++ = '"'; break;
        case '\\': *w++ = '\\'; break;
        case '\b': *w++ = 'b'; break;
        case '\f': *w++ = 'f'; break;
        case '\n': *w++ = 'n'; break;
        case '\r': *w++ = 'r'; break;
        case '\t': *w++ = 't'; break;
        default:
            *w++ = 'u';
            *w++ = '0';
            *w++ = '0';
            *w++ = "0123456789abcdef"[c >> 4];
            *w++ = "0123456789abcdef"[c & 15];
        }
    }
    *w++ = '"';
    o->len = (size_t)(w - o->data);
    return 0;
}

static int put_int(Out *o, PyObject *v) {
    int overflow;
    long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
    if (x == -1 && PyErr_Occurred())
        return -1;
    if (overflow) { /* int.__repr__, as json: it may refuse a very long one */
        PyObject *text = PyLong_Type.tp_repr(v);
        if (text == NULL)
            return -1;
        int rc = out_put(o, (const char *)PyUnicode_DATA(text), (size_t)PyUnicode_GET_LENGTH(text));
        Py_DECREF(text);
        return rc;
    }
    char digits[24];
    int i = (int)sizeof digits;
    unsigned long long u = x < 0 ? 0ULL - (unsigned long long)x : (unsigned long long)x;
    do {
        digits[--i] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (x < 0)
        digits[--i] = '-';
    return out_put(o, digits + i, sizeof digits - (size_t)i);
}

/* 0 when done, 1 when the value is not one this encoder knows, -1 with an exception
 * set: MemoryError, or what the fallback will say better (a lone surrogate, an int too
 * long to print). canonical() hands 1 and -1 but MemoryError to the fallback. */
static int put_value(Out *o, PyObject *v, int depth);

/* repr(d) for a d that is a whole number of microseconds, |d| in [1e-4, 2**32) (the audit
 * log's start times and both runners' durations are made so): 1 for any other d.
 *
 * d is then the double nearest to k / 10**6 for an integer k, and the text t of k / 10**6
 * (at most six decimals, the trailing zeros dropped) is repr's: t rounds to d; a string
 * with fewer significant digits rounding to d too would differ from t by at least 1e-6
 * (both have at most six decimals, or it has more digits), more than the two can differ
 * by (the gap between d and its neighbours, at most 2**-20 below 2**32); and repr writes
 * every value in [1e-4, 1e16) without an exponent. Every other float goes through
 * David Gay's dtoa, ~7,000 instructions for a timestamp (a bignum loop). Only where C
 * doubles are IEEE doubles evaluated as such (FLT_EVAL_METHOD 0: the check below would
 * not be exact in x87 extended precision). */
static int put_micros(Out *o, double d) {
#if defined(FLT_EVAL_METHOD) && FLT_EVAL_METHOD == 0
    double a = fabs(d);
    if (!(a >= 1e-4 && a < 4294967296.0))
        return 1;
    long long k = llround(a * 1e6); /* < 2**53: exact as a double */
    if ((double)k / 1e6 != a)       /* a division correctly rounded: d is nearest to k / 10**6 */
        return 1;
    char text[40], *end = text + sizeof text, *p = end;
    long long whole = k / 1000000;
    int fraction = (int)(k % 1000000), digits = 6;
    while (digits > 1 && fraction % 10 == 0) { /* the trailing zeros dropped, one digit kept */
        fraction /= 10;
        digits--;
    }
    for (int i = 0; i < digits; i++, fraction /= 10)
        *--p = (char)('0' + fraction % 10);
    *--p = '.';
    do
        *--p = (char)('0' + whole % 10);
    while ((whole /= 10) > 0);
    if (d < 0)
        *--p = '-';
    return out_put(o, p, (size_t)(end - p));
#else
    (void)o;
    (void)d;
    return 1;
#endif
}

static int put_float(Out *o, PyObject *v) {
    double d = PyFloat_AS_DOUBLE(v);
    if (!isfinite(d))
        return 1; /* json raises (allow_nan=False): the fallback says so */
    int micros = put_micros(o, d);
    if (micros <= 0)
        return micros;
    char *text = PyOS_double_to_string(d, 'r', 0, Py_DTSF_ADD_DOT_0, NULL); /* float.__repr__ */
    if (text == NULL)
        return -1;
    int rc = out_put(o, text, strlen(text));
    PyMem_Free(text);
    return rc;
}

static int put_items(Out *o, PyObject *seq, int depth) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    if (out_char(o, '[') < 0)
        return -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (i && out_char(o, ',') < 0)
            return -1;
        int rc = put_value(o, items[i], depth + 1); /* runs no Python code: n holds */
        if (rc)
            return rc;
    }
    return out_char(o, ']');
}

static int put_dict(Out *o, PyObject *d, int depth) {
    Py_ssize_t n = PyDict_GET_SIZE(d);
    if (n == 0)
        return out_put(o, "{}", 2);
    PyObject *keys = PyDict_Keys(d);
    if (keys == NULL)
        return -1;
    int rc = 0;
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyUnicode_CheckExact(PyList_GET_ITEM(keys, i))) {
            rc = 1; /* json's key rules (numbers, None, bool, sorting mixed keys): the fallback */
            goto done;
        }
    if (n > 1 && PyList_Sort(keys) < 0) { /* str against str: no Python code runs */
        rc = -1;
        goto done;
    }
    if (out_char(o, '{') < 0) {
        rc = -1;
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        PyObject *value = PyDict_GetItemWithError(d, key); /* borrowed; exact str keys: no Python */
        if (value == NULL) {
            rc = PyErr_Occurred() ? -1 : 1;
            goto done;
        }
        if ((i && out_char(o, ',') < 0) || put_str(o, key) < 0 || out_char(o, ':') < 0) {
            rc = -1;
            goto done;
        }
        if ((rc = put_value(o, value, depth + 1)))
            goto done;
    }
    rc = out_char(o, '}');
done:
    Py_DECREF(keys);
    return rc;
}

static int put_value(Out *o, PyObject *v, int depth) {
    if (depth > MAX_DEPTH)
        return 1;
    if (v == Py_None)
        return out_put(o, "null", 4);
    if (v == Py_True)
        return out_put(o, "true", 4);
    if (v == Py_False)
        return out_put(o, "false", 5);
    if (PyUnicode_Check(v))
        return put_str(o, v);
    if (PyLong_Check(v))
        return put_int(o, v);
    if (PyFloat_Check(v))
        return put_float(o, v);
    if (PyList_CheckExact(v) || PyTuple_CheckExact(v))
        return put_items(o, v, depth);
    if (PyDict_CheckExact(v))
        return put_dict(o, v, depth);
    return 1;
}

static PyObject *canonical(PyObject *fallback, PyObject *value) {
    Out o;
    o.data = o.small;
    o.len = 0;
    o.cap = sizeof o.small;
    o.ascii = 1;
    int rc = put_value(&o, value, 0);
    PyObject *text = NULL;
    if (rc == 0) {
        if (o.ascii) {
            text = PyUnicode_New((Py_ssize_t)o.len, 127);
            if (text != NULL)
                memcpy(PyUnicode_DATA(text), o.data, o.len);
        } else {
            text = PyUnicode_DecodeUTF8(o.data, (Py_ssize_t)o.len, "strict");
        }
    }
    if (o.data != o.small)
        PyMem_Free(o.data);
    if (text != NULL)
        return text;
    if (PyErr_ExceptionMatches(PyExc_MemoryError)) /* false when nothing was raised */
        return NULL;
    PyErr_Clear(); /* a lone surrogate, an int too long to print: the fallback says it */
    return PyObject_CallOneArg(fallback, value);
}

static PyMethodDef canonical_def = {
    "canonical_json", (PyCFunction)canonical, METH_O,
    "canonical_json(value, /)\n--\n\n"
    "The canonical JSON text of value (sorted keys, no spaces, UTF-8 kept); values it does\n"
    "not know are handed to the fallback given to canonical_encoder.",
};

/* def bound to fallback (its self): the function canonical_encoder and audit_finisher give. */
static PyObject *with_fallback(PyMethodDef *def, PyObject *fallback, const char *maker) {
    if (!PyCallable_Check(fallback))
        return PyErr_Format(PyExc_TypeError, "%s(fallback): fallback must be callable", maker);
    return PyCFunction_NewEx(def, fallback, NULL);
}

static PyObject *canonical_encoder(PyObject *module, PyObject *fallback) {
    (void)module;
    return with_fallback(&canonical_def, fallback, "canonical_encoder");
}

static PyObject *write_all(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "write_all(fd, data) takes two arguments");
        return NULL;
    }
    long fd = PyLong_AsLong(args[0]);
    if (fd == -1 && PyErr_Occurred())
        return NULL;
    if (fd < 0 || fd > INT_MAX) {
        PyErr_SetString(PyExc_ValueError, "write_all: fd out of range");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[1], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    const char *p = view.buf;
    Py_ssize_t left = view.len;
    while (left > 0) {
        ssize_t n = write((int)fd, p, (size_t)left);
        if (n < 0) {
            if (errno == EINTR) {
                if (PyErr_CheckSignals() < 0)
                    goto fail;
                continue;
            }
            PyErr_SetFromErrno(PyExc_OSError);
            goto fail;
        }
        p += n;
        left -= n;
        if (left > 0 && PyErr_CheckSignals() < 0) /* cut short, perhaps by a signal: its handler runs */
            goto fail;
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
fail:
    PyBuffer_Release(&view);
    return NULL;
}

/* The path of stamp i (a tuple of n items, the first a str) as UTF-8 without NUL, or
 * NULL: *bad set when it cannot be said here (the caller returns None: Python checks),
 * an exception set (TypeError) when the stamp is malformed. */
static const char *stamp_path(PyObject *stamp, Py_ssize_t n, int *bad) {
    if (!PyTuple_CheckExact(stamp) || PyTuple_GET_SIZE(stamp) != n || !PyUnicode_Check(PyTuple_GET_ITEM(stamp, 0))) {
        PyErr_Format(PyExc_TypeError, "a stamp is a tuple of %zd items, a str first", n);
        return NULL;
    }
    Py_ssize_t size;
    const char *path = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(stamp, 0), &size);
    if (path == NULL || (Py_ssize_t)strlen(path) != size) { /* a lone surrogate, a NUL */
        PyErr_Clear();
        *bad = 1;
        return NULL;
    }
    return path;
}

/* One stamp's check, given its path: 1 it holds, 0 it does not, -1 an exception is set,
 * 2 it cannot be said here (the caller returns None: Python checks). */
typedef int (*StampCheck)(PyObject *stamp, const char *path);

/* Whether every stamp of stamps (tuples of arity items, a path first) holds: True,
 * False at the first that does not, None when one cannot be checked here. */
static PyObject *check_stamps(PyObject *stamps, Py_ssize_t arity, const char *refused, StampCheck check) {
    PyObject *seq = PySequence_Fast(stamps, refused);
    if (seq == NULL)
        return NULL;
    PyObject *result = Py_True;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    for (Py_ssize_t i = 0; i < n && result == Py_True; i++) {
        PyObject *stamp = PySequence_Fast_GET_ITEM(seq, i);
        int bad = 0;
        const char *path = stamp_path(stamp, arity, &bad);
        int holds = path == NULL ? (bad ? 2 : -1) : check(stamp, path);
        result = holds == 1 ? Py_True : holds == 0 ? Py_False : holds == 2 ? Py_None : NULL;
    }
    Py_DECREF(seq);
    return Py_XNewRef(result);
}

/* (path, st_dev, st_ino), or (path, None, None): stat fails. */
static int same_file(PyObject *stamp, const char *path) {
    PyObject *dev = PyTuple_GET_ITEM(stamp, 1), *ino = PyTuple_GET_ITEM(stamp, 2);
    struct stat st;
    int found = stat(path, &st) == 0;
    if (dev == Py_None) /* recorded absent: whatever stat fails on */
        return !found;
    if (!found)
        return 0;
    unsigned long long want_dev = PyLong_AsUnsignedLongLong(dev);
    unsigned long long want_ino = PyLong_AsUnsignedLongLong(ino);
    if (PyErr_Occurred()) { /* out of range: no file has it; not an int: an error */
        if (!PyErr_ExceptionMatches(PyExc_OverflowError))
            return -1;
        PyErr_Clear();
        return 0;
    }
    return (unsigned long long)st.st_dev == want_dev && (unsigned long long)st.st_ino == want_ino;
}

/* (path, st_mtime_ns) */
static int same_mtime(PyObject *stamp, const char *path) {
    int overflow = 0;
    long long want = PyLong_AsLongLongAndOverflow(PyTuple_GET_ITEM(stamp, 1), &overflow);
    if (want == -1 && PyErr_Occurred())
        return -1;
    struct stat st;
    if (overflow || stat(path, &st) != 0)
        return 0;
    /* st_mtime_ns as os.stat computes it; a time this cannot hold: Python checks */
    long long sec = (long long)st.st_mtim.tv_sec, ns = (long long)st.st_mtim.tv_nsec;
    if (sec > LLONG_MAX / 1000000000LL - 1 || sec < LLONG_MIN / 1000000000LL + 1)
        return 2;
    return sec * 1000000000LL + ns == want;
}

static PyObject *same_files(PyObject *module, PyObject *stamps) {
    (void)module;
    return check_stamps(stamps, 3, "same_files(stamps): stamps must be a sequence", same_file);
}

static PyObject *same_mtimes(PyObject *module, PyObject *stamps) {
    (void)module;
    return check_stamps(stamps, 2, "same_mtimes(stamps): stamps must be a sequence", same_mtime);
}

/* light(args, budget): schema.arguments._walk_is_light(args) with that budget, for values
 * made of exact dicts (any keys), lists, tuples, strs, ints, floats, bools and None:
 * each value costs 1, a str its length too, a dict key its length (a str) or 1 (not a
 * str). True when the whole costs at most budget, False as soon as it costs more, None
 * when a value of another type (a subclass too) comes first: the caller walks in Python
 * then. Every cost is positive, so whatever else the value holds, a cost over budget
 * here is over budget there. No Python code runs (exact types only, borrowed references
 * while the GIL is held), so the value cannot change under the walk; its stack is one
 * entry per value still to visit, fewer than budget + 2 of them. */
static PyObject *light(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyLong_CheckExact(args[1])) {
        PyErr_SetString(PyExc_TypeError, "light(args, budget): budget must be an int");
        return NULL;
    }
    long long budget = PyLong_AsLongLong(args[1]);
    if (budget == -1 && PyErr_Occurred())
        return NULL;
    if (budget < 0 || budget > 1 << 24) {
        PyErr_SetString(PyExc_ValueError, "light(args, budget): budget must be in 0..2**24");
        return NULL;
    }
    PyObject *small[64];
    PyObject **stack = small;
    Py_ssize_t cap = 64, top = 0;
    PyObject *answer = Py_True;
    stack[top++] = args[0];
    while (top > 0) {
        PyObject *value = stack[--top];
        PyTypeObject *type = Py_TYPE(value);
        Py_ssize_t pushed = 0, count = 0;
        PyObject *const *items = NULL;
        budget -= 1;
        if (type == &PyUnicode_Type) {
            budget -= PyUnicode_GET_LENGTH(value);
        } else if (type == &PyLong_Type || type == &PyFloat_Type || type == &PyBool_Type || value == Py_None) {
        } else if (type == &PyDict_Type) {
            count = PyDict_GET_SIZE(value);
        } else if (type == &PyList_Type) {
            count = PyList_GET_SIZE(value);
            items = ((PyListObject *)value)->ob_item;
        } else if (type == &PyTuple_Type) {
            count = PyTuple_GET_SIZE(value);
            items = ((PyTupleObject *)value)->ob_item;
        } else {
            answer = Py_None;
            break;
        }
        if (count > 0) {
            if (count > budget + 1) { /* each item costs at least 1: over budget for sure */
                answer = Py_False;
                break;
            }
            if (top + count > cap) {
                Py_ssize_t want = cap * 2 > top + count ? cap * 2 : top + count;
                PyObject **grown = PyMem_Malloc((size_t)want * sizeof *grown);
                if (grown == NULL) {
                    answer = NULL;
                    PyErr_NoMemory();
                    break;
                }
                memcpy(grown, stack, (size_t)top * sizeof *grown);
                if (stack != small)
                    PyMem_Free(stack);
                stack = grown;
                cap = want;
            }
            if (type == &PyDict_Type) {
                Py_ssize_t pos = 0;
                PyObject *key, *item;
                while (PyDict_Next(value, &pos, &key, &item)) {
                    if (PyUnicode_CheckExact(key))
                        budget -= PyUnicode_GET_LENGTH(key);
                    else if (PyUnicode_Check(key)) { /* a str subclass: its len() may be its own */
                        answer = Py_None;
                        break;
                    } else
                        budget -= 1;
                    stack[top + pushed++] = item;
                }
                if (answer == Py_None)
                    break;
            } else {
                memcpy(stack + top, items, (size_t)count * sizeof *stack);
                pushed = count;
            }
            top += pushed;
        }
        if (budget < 0) {
            answer = Py_False;
            break;
        }
    }
    if (stack != small)
        PyMem_Free(stack);
    return answer == NULL ? NULL : Py_NewRef(answer);
}

/* ------------------------------------------------------------------ sha256_hex */

static const uint32_t SHA_K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(uint32_t h[8], const unsigned char *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i - 15], 7) ^ ROTR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROTR(w[i - 2], 17) ^ ROTR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25)) + ((e & f) ^ (~e & g)) + SHA_K[i] + w[i];
        uint32_t t2 = (ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += k;
}

static void sha_blocks_portable(uint32_t h[8], const unsigned char *data, size_t blocks) {
    for (size_t i = 0; i < blocks; i++)
        sha_block(h, data + 64 * i);
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define SHA_NI_TARGET __attribute__((target("sha,sse4.1,ssse3")))

/* One group of four rounds with the SHA extensions; g is the group (0-15), m[g % 4] its
 * message words. Groups 3-14 make the next group's words (sha256msg2), 1-12 start those
 * of the group after next (sha256msg1): Intel's published schedule. */
SHA_NI_TARGET static inline __attribute__((always_inline)) void sha_ni_group(__m128i *state0, __m128i *state1, __m128i m[4], int g) {
    __m128i msg = _mm_add_epi32(m[g % 4], _mm_loadu_si128((const __m128i *)&SHA_K[4 * g]));
    *state1 = _mm_sha256rnds2_epu32(*state1, *state0, msg);
    if (g >= 3 && g <= 14) {
        __m128i tmp = _mm_alignr_epi8(m[g % 4], m[(g + 3) % 4], 4);
        m[(g + 1) % 4] = _mm_sha256msg2_epu32(_mm_add_epi32(m[(g + 1) % 4], tmp), m[g % 4]);
    }
    msg = _mm_shuffle_epi32(msg, 0x0E);
    *state0 = _mm_sha256rnds2_epu32(*state0, *state1, msg);
    if (g >= 1 && g <= 12)
        m[(g + 3) % 4] = _mm_sha256msg1_epu32(m[(g + 3) % 4], m[g % 4]);
}

SHA_NI_TARGET static void sha_blocks_ni(uint32_t h[8], const unsigned char *data, size_t blocks) {
    const __m128i swap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i tmp = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* CDAB */
    __m128i state1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* EFGH */
    __m128i state0 = _mm_alignr_epi8(tmp, state1, 8);  /* ABEF */
    state1 = _mm_blend_epi16(state1, tmp, 0xF0);        /* CDGH */
    for (size_t b = 0; b < blocks; b++, data += 64) {
        __m128i abef = state0, cdgh = state1, m[4];
        for (int i = 0; i < 4; i++)
            m[i] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(data + 16 * i)), swap);
#pragma GCC unroll 16
        for (int g = 0; g < 16; g++) /* unrolled: m[] stays in registers, the ifs fold away */
            sha_ni_group(&state0, &state1, m, g);
        state0 = _mm_add_epi32(state0, abef);
        state1 = _mm_add_epi32(state1, cdgh);
    }
    tmp = _mm_shuffle_epi32(state0, 0x1B);              /* FEBA */
    state1 = _mm_shuffle_epi32(state1, 0xB1);           /* DCHG */
    state0 = _mm_blend_epi16(tmp, state1, 0xF0);        /* DCBA */
    state1 = _mm_alignr_epi8(state1, tmp, 8);           /* ABEF */
    _mm_storeu_si128((__m128i *)&h[0], state0);
    _mm_storeu_si128((__m128i *)&h[4], state1);
}

static int has_sha_ni(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_SSE4_1) || !(c & bit_SSSE3))
        return 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29)); /* CPUID.7.0:EBX.SHA */
}
#else
static int has_sha_ni(void) { return 0; }
#define sha_blocks_ni sha_blocks_portable
#endif

typedef void (*ShaBlocks)(uint32_t h[8], const unsigned char *data, size_t blocks);
static ShaBlocks sha_blocks = sha_blocks_portable; /* sha_blocks_ni where the CPU has it (module exec) */

/* The digest of data[0:n] into out (32 bytes), its blocks hashed by blocks. */
static void sha256(const unsigned char *data, size_t n, unsigned char out[32], ShaBlocks blocks) {
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t whole = n - n % 64;
    blocks(h, data, whole / 64);
    unsigned char last[128] = {0};
    size_t rest = n - whole, pad = rest < 56 ? 64 : 128;
    memcpy(last, data + whole, rest);
    last[rest] = 0x80;
    uint64_t bits = (uint64_t)n * 8;
    for (int i = 0; i < 8; i++)
        last[pad - 1 - i] = (unsigned char)(bits >> (8 * i));
    blocks(h, last, pad / 64);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char)(h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(h[i] >> 8);
        out[4 * i + 3] = (unsigned char)h[i];
    }
}

#define SHA_UNLOCKED (64 * 1024) /* from this size on, the GIL is released while hashing */

/* The SHA-256 of bytes[0:n] as 64 lowercase hex digits; the bytes must stay put (an
 * immutable object's) while the GIL is released for a large input. */
static PyObject *hex_digest(const char *bytes, Py_ssize_t n, ShaBlocks blocks) {
    unsigned char digest[32];
    if (n >= SHA_UNLOCKED) {
        Py_BEGIN_ALLOW_THREADS
        sha256((const unsigned char *)bytes, (size_t)n, digest, blocks);
        Py_END_ALLOW_THREADS
    } else {
        sha256((const unsigned char *)bytes, (size_t)n, digest, blocks);
    }
    static const char hex[] = "0123456789abcdef";
    PyObject *text = PyUnicode_New(64, 127);
    if (text == NULL)
        return NULL;
    Py_UCS1 *out = PyUnicode_1BYTE_DATA(text);
    for (int i = 0; i < 32; i++) {
        out[2 * i] = (Py_UCS1)hex[digest[i] >> 4];
        out[2 * i + 1] = (Py_UCS1)hex[digest[i] & 15];
    }
    return text;
}

static PyObject *sha256_hex_with(PyObject *data, ShaBlocks blocks) {
    const char *bytes;
    Py_ssize_t n;
    if (PyBytes_Check(data)) {
        bytes = PyBytes_AS_STRING(data);
        n = PyBytes_GET_SIZE(data);
    } else if (PyUnicode_Check(data)) {
        bytes = PyUnicode_AsUTF8AndSize(data, &n); /* cached in the str: immutable while hashed */
        if (bytes == NULL)
            return NULL;
    } else {
        return PyErr_Format(PyExc_TypeError, "sha256_hex() takes bytes or str, not %.100s", Py_TYPE(data)->tp_name);
    }
    return hex_digest(bytes, n, blocks);
}

static PyObject *sha256_hex(PyObject *module, PyObject *data) {
    (void)module;
    return sha256_hex_with(data, sha_blocks);
}

static PyObject *sha256_hex_portable(PyObject *module, PyObject *data) {
    (void)module;
    return sha256_hex_with(data, sha_blocks_portable);
}

/* ------------------------------------------------------------------ audit_finisher */

/* Attribute names the finisher and the starter read, and two texts, interned once (module exec). */
static PyObject *A_decision, *A_value, *A_remote, *A_error, *A_stderr_tail, *A_outcome, *A_exit_code,
    *A_signal, *A_verdict, *A_value_, *A_reason, *A_plugin, *A_empty, *A_no_list, *A_tool, *A_call_id, *A_name,
    *A_tool_class, *A_persona, *A_caller, *A_args_json, *A_args_digest;

/* Whether the error raised is one dumps() turns into a repr (audit.rows.dumps). */
static int dumps_would_catch(void) {
    return PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError) ||
           PyErr_ExceptionMatches(PyExc_RecursionError);
}

/* audit.rows.finish_row for the common row: a decision, no error, no stderr, no remote
 * run, no approvers, values canonical JSON has text for. Returns ((values, middle), the F
 * line's JSON) exactly as the Python function does, or None for any other row (the
 * Python function makes it). */
static PyObject *audit_finish(PyObject *fallback, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "finish(head, head_text, tail_values, tail_hashed, ticket, approvers, result, duration)");
        return NULL;
    }
    PyObject *head = args[0], *head_text = args[1], *tail_values = args[2], *tail_hashed = args[3];
    PyObject *ticket = args[4], *approvers = args[5], *result = args[6], *duration = args[7];
    if (!PyList_CheckExact(head) || !PyUnicode_CheckExact(head_text) || PyUnicode_GET_LENGTH(head_text) < 2 ||
        !PyList_CheckExact(tail_values) || !PyUnicode_CheckExact(tail_hashed) || !PyTuple_CheckExact(approvers) ||
        PyTuple_GET_SIZE(approvers) != 0)
        Py_RETURN_NONE;
    PyObject *decision = NULL, *value = NULL, *remote = NULL, *error = NULL, *stderr_tail = NULL;
    PyObject *outcome = NULL, *exit_code = NULL, *signal_ = NULL, *verdict = NULL, *verdict_text = NULL;
    PyObject *reason = NULL, *plugin = NULL, *outcome_text = NULL, *seconds = NULL, *text = NULL;
    PyObject *size = NULL, *digest = NULL, *body = NULL, *body_text = NULL, *answer = NULL;
    int plain = 0, has_error, has_stderr; /* plain: the common row, made here */
    Py_ssize_t n = 0;
    const char *utf8 = "";
    if ((decision = PyObject_GetAttr(result, A_decision)) == NULL || (remote = PyObject_GetAttr(result, A_remote)) == NULL ||
        (error = PyObject_GetAttr(result, A_error)) == NULL ||
        (stderr_tail = PyObject_GetAttr(result, A_stderr_tail)) == NULL)
        goto done;
    has_error = PyObject_IsTrue(error);
    has_stderr = PyObject_IsTrue(stderr_tail);
    if (has_error < 0 || has_stderr < 0)
        goto done;
    if (decision == Py_None || remote != Py_None || has_error || has_stderr) {
        answer = Py_NewRef(Py_None);
        goto done;
    }
    if ((value = PyObject_GetAttr(result, A_value)) == NULL || (outcome = PyObject_GetAttr(result, A_outcome)) == NULL ||
        (exit_code = PyObject_GetAttr(result, A_exit_code)) == NULL ||
        (signal_ = PyObject_GetAttr(result, A_signal)) == NULL || (verdict = PyObject_GetAttr(decision, A_verdict)) == NULL ||
        (verdict_text = PyObject_GetAttr(verdict, A_value_)) == NULL ||
        (reason = PyObject_GetAttr(decision, A_reason)) == NULL || (plugin = PyObject_GetAttr(decision, A_plugin)) == NULL ||
        (outcome_text = PyObject_Str(outcome)) == NULL || (seconds = PyNumber_Float(duration)) == NULL)
        goto done;
    if (value != Py_None) {
        text = canonical(fallback, value);
        if (text == NULL || (utf8 = PyUnicode_AsUTF8AndSize(text, &n)) == NULL) {
            if (dumps_would_catch() || PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) {
                PyErr_Clear(); /* the Python function words it (a repr, or its own error) */
                answer = Py_NewRef(Py_None);
            }
            goto done;
        }
    }
    /* the UTF-8 is text's own (cached in it): it stays put while the digest is made */
    digest = n == 0 ? Py_NewRef(A_empty) : hex_digest(utf8, n, sha_blocks);
    if (digest == NULL || (size = PyLong_FromSsize_t(n)) == NULL)
        goto done;
    if ((body = PyList_New(14)) == NULL)
        goto done;
    { /* verdict reason plugin outcome error exit_code signal duration stderr_tail result_size
       * result_digest ticket approvers remote: audit.journal.END_COLUMNS */
        PyObject *const items[14] = {verdict_text, reason, plugin, outcome_text, Py_None, exit_code, signal_,
                                     seconds, A_no_list, size, digest, ticket, A_no_list, Py_None};
        for (int i = 0; i < 14; i++)
            PyList_SET_ITEM(body, i, Py_NewRef(items[i]));
    }
    body_text = canonical(fallback, body);
    if (body_text == NULL) {
        if (dumps_would_catch()) { /* a NaN duration: the Python function keeps the row lenient */
            PyErr_Clear();
            answer = Py_NewRef(Py_None);
        }
        goto done;
    }
    plain = 1;
done:
    if (plain) {
        Py_ssize_t h = PyUnicode_GET_LENGTH(head_text), b = PyUnicode_GET_LENGTH(body_text);
        PyObject *head_inner = PyUnicode_Substring(head_text, 1, h - 1);
        PyObject *body_inner = head_inner ? PyUnicode_Substring(body_text, 1, b - 6) : NULL; /* ",null]": remote */
        PyObject *middle = body_inner ? PyUnicode_FromFormat("%U,%U,%U", head_inner, body_inner, tail_hashed) : NULL;
        Py_ssize_t nh = PyList_GET_SIZE(head), nt = PyList_GET_SIZE(tail_values);
        PyObject *values = middle ? PyList_New(nh + 13 + nt + 1) : NULL;
        if (values != NULL) {
            for (Py_ssize_t i = 0; i < nh; i++)
                PyList_SET_ITEM(values, i, Py_NewRef(PyList_GET_ITEM(head, i)));
            for (Py_ssize_t i = 0; i < 13; i++)
                PyList_SET_ITEM(values, nh + i, Py_NewRef(PyList_GET_ITEM(body, i)));
            for (Py_ssize_t i = 0; i < nt; i++)
                PyList_SET_ITEM(values, nh + 13 + i, Py_NewRef(PyList_GET_ITEM(tail_values, i)));
            PyList_SET_ITEM(values, nh + 13 + nt, Py_NewRef(Py_None));
            answer = Py_BuildValue("((OO)O)", values, middle, body_text);
            Py_DECREF(values);
        }
        Py_XDECREF(head_inner);
        Py_XDECREF(body_inner);
        Py_XDECREF(middle);
    }
    Py_XDECREF(decision);
    Py_XDECREF(value);
    Py_XDECREF(remote);
    Py_XDECREF(error);
    Py_XDECREF(stderr_tail);
    Py_XDECREF(outcome);
    Py_XDECREF(exit_code);
    Py_XDECREF(signal_);
    Py_XDECREF(verdict);
    Py_XDECREF(verdict_text);
    Py_XDECREF(reason);
    Py_XDECREF(plugin);
    Py_XDECREF(outcome_text);
    Py_XDECREF(seconds);
    Py_XDECREF(text);
    Py_XDECREF(size);
    Py_XDECREF(digest);
    Py_XDECREF(body);
    Py_XDECREF(body_text);
    return answer;
}

static PyMethodDef audit_finish_def = {
    "finish", (PyCFunction)(void (*)(void))audit_finish, METH_FASTCALL,
    "finish(head, head_text, tail_values, tail_hashed, ticket, approvers, result, duration, /)\n--\n\n"
    "audit.rows.finish_row for the common row, or None (the Python function makes the others).",
};

static PyObject *audit_finisher(PyObject *module, PyObject *fallback) {
    (void)module;
    return with_fallback(&audit_finish_def, fallback, "audit_finisher");
}

static int intern_names(void) {
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {{&A_decision, "decision"}, {&A_value, "value"},       {&A_remote, "remote"},
                 {&A_error, "error"},       {&A_stderr_tail, "stderr_tail"}, {&A_outcome, "outcome"},
                 {&A_exit_code, "exit_code"}, {&A_signal, "signal"},   {&A_verdict, "verdict"},
                 {&A_value_, "_value_"},    {&A_reason, "reason"},     {&A_plugin, "plugin"},
                 {&A_empty, ""},            {&A_no_list, "[]"},        {&A_tool, "tool"},
                 {&A_call_id, "call_id"},   {&A_name, "name"},         {&A_tool_class, "tool_class"},
                 {&A_persona, "persona"},   {&A_caller, "caller"},     {&A_args_json, "args_json"},
                 {&A_args_digest, "args_digest"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return -1;
    return 0;
}

/* ------------------------------------------------------------------ audit_starter */

/* Whether the ASCII text, lowercased and without '-' and '_', holds one of names (bytes):
 * audit.rows._may_name_secret for an ASCII text. -1 on a memory error. */
static int names_a_secret(const char *text, Py_ssize_t n, PyObject *names) {
    char small[512], *folded = n <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc((size_t)n);
    if (folded == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    size_t len = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        char c = text[i];
        if (c != '-' && c != '_')
            folded[len++] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    int found = 0;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(names) && !found; k++) {
        PyObject *name = PyTuple_GET_ITEM(names, k);
        found = memmem(folded, len, PyBytes_AS_STRING(name), (size_t)PyBytes_GET_SIZE(name)) != NULL;
    }
    if (folded != small)
        PyMem_Free(folded);
    return found;
}

/* audit.rows.start_row's head for a call whose arguments' text is ASCII and names no
 * secret: (head, its canonical text), or None (the Python function makes the head). */
static PyObject *audit_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *fallback = PyTuple_GET_ITEM(self, 0), *names = PyTuple_GET_ITEM(self, 1);
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "start(started, request)");
        return NULL;
    }
    PyObject *started = args[0], *request = args[1];
    PyObject *text = NULL, *tool = NULL, *call_id = NULL, *name = NULL, *tool_class = NULL, *class_text = NULL;
    PyObject *persona = NULL, *persona_name = NULL, *caller = NULL, *digest = NULL, *head = NULL;
    PyObject *head_text = NULL, *answer = NULL;
    int secret;
    if ((text = PyObject_GetAttr(request, A_args_json)) == NULL)
        goto done;
    if (!PyUnicode_CheckExact(text) || PyUnicode_GET_LENGTH(text) == 0 || !PyUnicode_IS_ASCII(text)) {
        answer = Py_NewRef(Py_None);
        goto done;
    }
    secret = names_a_secret((const char *)PyUnicode_1BYTE_DATA(text), PyUnicode_GET_LENGTH(text), names);
    if (secret != 0) {
        if (secret > 0)
            answer = Py_NewRef(Py_None);
        goto done;
    }
    if ((tool = PyObject_GetAttr(request, A_tool)) == NULL || (call_id = PyObject_GetAttr(request, A_call_id)) == NULL ||
        (name = PyObject_GetAttr(tool, A_name)) == NULL || (tool_class = PyObject_GetAttr(tool, A_tool_class)) == NULL ||
        (class_text = PyObject_GetAttr(tool_class, A_value_)) == NULL ||
        (persona = PyObject_GetAttr(request, A_persona)) == NULL ||
        (persona_name = PyObject_GetAttr(persona, A_name)) == NULL ||
        (caller = PyObject_GetAttr(request, A_caller)) == NULL ||
        (digest = PyObject_GetAttr(request, A_args_digest)) == NULL || (head = PyList_New(9)) == NULL)
        goto done;
    { /* time call_id tool tool_class persona caller args args_digest redacted: rows.HEAD_COLUMNS */
        PyObject *const items[9] = {started, call_id, name, class_text, persona_name, caller, text, digest, A_no_list};
        for (int i = 0; i < 9; i++)
            PyList_SET_ITEM(head, i, Py_NewRef(items[i]));
    }
    if ((head_text = canonical(fallback, head)) == NULL) {
        if (dumps_would_catch()) { /* no canonical text (a NaN time): the Python function decides */
            PyErr_Clear();
            answer = Py_NewRef(Py_None);
        }
        goto done;
    }
    answer = PyTuple_Pack(2, head, head_text);
done:
    Py_XDECREF(text);
    Py_XDECREF(tool);
    Py_XDECREF(call_id);
    Py_XDECREF(name);
    Py_XDECREF(tool_class);
    Py_XDECREF(class_text);
    Py_XDECREF(persona);
    Py_XDECREF(persona_name);
    Py_XDECREF(caller);
    Py_XDECREF(digest);
    Py_XDECREF(head);
    Py_XDECREF(head_text);
    return answer;
}

static PyMethodDef audit_start_def = {
    "start", (PyCFunction)(void (*)(void))audit_start, METH_FASTCALL,
    "start(started, request, /)\n--\n\n"
    "audit.rows.start_row's (head, head_text) for a call whose arguments' text is ASCII and\n"
    "names no secret, or None (the Python function makes the others).",
};

static PyObject *audit_starter(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 2 || !PyCallable_Check(args[0]) || !PyTuple_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "audit_starter(fallback, names): a callable and a tuple of bytes");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(args[1]); i++)
        if (!PyBytes_Check(PyTuple_GET_ITEM(args[1], i)) || PyBytes_GET_SIZE(PyTuple_GET_ITEM(args[1], i)) == 0) {
            PyErr_SetString(PyExc_TypeError, "audit_starter(fallback, names): names are non-empty bytes");
            return NULL;
        }
    PyObject *self = PyTuple_Pack(2, args[0], args[1]);
    if (self == NULL)
        return NULL;
    PyObject *start = PyCFunction_NewEx(&audit_start_def, self, NULL);
    Py_DECREF(self);
    return start;
}

/* ------------------------------------------------------------------ slot_builder */

enum { FIELD_ARG = 0, FIELD_CONSTANT = 1, FIELD_FACTORY = 2 };

typedef struct {
    PyObject *descr;     /* the slot's member descriptor */
    descrsetfunc set;    /* its type's __set__ */
    int kind;            /* FIELD_ARG, FIELD_CONSTANT or FIELD_FACTORY */
    Py_ssize_t index;    /* FIELD_ARG: which argument */
    PyObject *payload;   /* FIELD_CONSTANT: the default; FIELD_FACTORY: the factory */
    PyObject *convert;   /* the converter, or NULL */
} Field;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyTypeObject *cls;
    PyObject *names; /* tuple of str: the parameters, in order */
    PyObject *empty; /* () for cls->tp_new */
    Py_ssize_t n_fields;
    Field *fields;
} BuilderObject;

#define SMALL_ARGS 16

/* The arguments of a call in parameter order (kwnames matched to names), in values. */
static int builder_arguments(BuilderObject *b, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                             PyObject **values) {
    Py_ssize_t n = PyTuple_GET_SIZE(b->names);
    if (nargs > n) {
        PyErr_Format(PyExc_TypeError, "build() takes %zd positional arguments but %zd were given", n, nargs);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        values[i] = i < nargs ? args[i] : NULL;
    Py_ssize_t n_kw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t k = 0; k < n_kw; k++) {
        PyObject *key = PyTuple_GET_ITEM(kwnames, k);
        Py_ssize_t at = -1;
        for (Py_ssize_t i = 0; i < n && at < 0; i++) {
            PyObject *name = PyTuple_GET_ITEM(b->names, i);
            if (name == key)
                at = i;
            else {
                int eq = PyUnicode_Compare(name, key) == 0;
                if (PyErr_Occurred())
                    return -1;
                if (eq)
                    at = i;
            }
        }
        if (at < 0) {
            PyErr_Format(PyExc_TypeError, "build() got an unexpected keyword argument '%S'", key);
            return -1;
        }
        if (values[at] != NULL) {
            PyErr_Format(PyExc_TypeError, "build() got multiple values for argument '%S'", key);
            return -1;
        }
        values[at] = args[nargs + k];
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (values[i] == NULL) {
            PyErr_Format(PyExc_TypeError, "build() missing required argument: '%S'", PyTuple_GET_ITEM(b->names, i));
            return -1;
        }
    return 0;
}

static PyObject *builder_call(BuilderObject *b, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf), n = PyTuple_GET_SIZE(b->names);
    PyObject *small[SMALL_ARGS], **values = small;
    PyObject *const *given = args;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        if (n > SMALL_ARGS && (values = PyMem_Malloc((size_t)n * sizeof *values)) == NULL)
            return PyErr_NoMemory();
        if (builder_arguments(b, args, nargs, kwnames, values) < 0) {
            if (values != small)
                PyMem_Free(values);
            return NULL;
        }
        given = values;
    } else if (nargs != n) {
        return PyErr_Format(PyExc_TypeError, "build() takes %zd positional arguments but %zd were given", n, nargs);
    }
    PyObject *self = b->cls->tp_new(b->cls, b->empty, NULL);
    for (Py_ssize_t i = 0; self != NULL && i < b->n_fields; i++) {
        const Field *f = &b->fields[i];
        PyObject *value;
        if (f->kind == FIELD_ARG)
            value = Py_NewRef(given[f->index]);
        else if (f->kind == FIELD_CONSTANT)
            value = Py_NewRef(f->payload);
        else
            value = PyObject_CallNoArgs(f->payload);
        if (value != NULL && f->convert != NULL)
            Py_SETREF(value, PyObject_CallOneArg(f->convert, value));
        if (value == NULL || f->set(f->descr, self, value) < 0)
            Py_CLEAR(self);
        Py_XDECREF(value);
    }
    if (values != small)
        PyMem_Free(values);
    return self;
}

static int builder_traverse(BuilderObject *b, visitproc visit, void *arg) {
    Py_VISIT(b->cls);
    Py_VISIT(b->names);
    for (Py_ssize_t i = 0; i < b->n_fields; i++) {
        Py_VISIT(b->fields[i].descr);
        Py_VISIT(b->fields[i].payload);
        Py_VISIT(b->fields[i].convert);
    }
    return 0;
}

static int builder_clear(BuilderObject *b) {
    Py_CLEAR(b->cls);
    Py_CLEAR(b->names);
    Py_CLEAR(b->empty);
    for (Py_ssize_t i = 0; i < b->n_fields; i++) {
        Py_CLEAR(b->fields[i].descr);
        Py_CLEAR(b->fields[i].payload);
        Py_CLEAR(b->fields[i].convert);
    }
    return 0;
}

static void builder_dealloc(BuilderObject *b) {
    PyObject_GC_UnTrack(b);
    builder_clear(b);
    PyMem_Free(b->fields);
    Py_TYPE(b)->tp_free((PyObject *)b);
}

static PyObject *builder_repr(BuilderObject *b) {
    return PyUnicode_FromFormat("<slot_builder of %s%S>", b->cls->tp_name, b->names);
}

static PyTypeObject BuilderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "ongrid_plugins._speedups.SlotBuilder",
    .tp_basicsize = sizeof(BuilderObject),
    .tp_dealloc = (destructor)builder_dealloc,
    .tp_vectorcall_offset = offsetof(BuilderObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_repr = (reprfunc)builder_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "build(*values): a new value of a frozen slotted class (made by slot_builder()).",
    .tp_traverse = (traverseproc)builder_traverse,
    .tp_clear = (inquiry)builder_clear,
};

static int builder_field(BuilderObject *b, Field *f, PyObject *spec) {
    Py_ssize_t n = PyTuple_GET_SIZE(b->names);
    if (!PyTuple_Check(spec) || PyTuple_GET_SIZE(spec) != 4) {
        PyErr_SetString(PyExc_TypeError, "a field is (descriptor, kind, payload, converter)");
        return -1;
    }
    PyObject *descr = PyTuple_GET_ITEM(spec, 0), *payload = PyTuple_GET_ITEM(spec, 2);
    PyObject *convert = PyTuple_GET_ITEM(spec, 3);
    descrsetfunc set = Py_TYPE(descr)->tp_descr_set;
    if (!PyObject_TypeCheck(descr, &PyMemberDescr_Type) || set == NULL ||
        !PyType_IsSubtype(b->cls, PyDescr_TYPE(descr))) {
        PyErr_SetString(PyExc_TypeError, "a field's descriptor must be a slot of the class");
        return -1;
    }
    long kind = PyLong_AsLong(PyTuple_GET_ITEM(spec, 1));
    if (kind == -1 && PyErr_Occurred())
        return -1;
    f->kind = (int)kind;
    f->index = 0;
    if (kind == FIELD_ARG) {
        f->index = PyLong_AsSsize_t(payload);
        if (f->index == -1 && PyErr_Occurred())
            return -1;
        if (f->index < 0 || f->index >= n) {
            PyErr_SetString(PyExc_ValueError, "a field's argument index is out of range");
            return -1;
        }
    } else if (kind == FIELD_FACTORY && !PyCallable_Check(payload)) {
        PyErr_SetString(PyExc_TypeError, "a field's factory must be callable");
        return -1;
    } else if (kind != FIELD_CONSTANT && kind != FIELD_FACTORY) {
        PyErr_SetString(PyExc_ValueError, "a field's kind is ARG (0), CONSTANT (1) or FACTORY (2)");
        return -1;
    }
    if (convert != Py_None && !PyCallable_Check(convert)) {
        PyErr_SetString(PyExc_TypeError, "a field's converter must be callable or None");
        return -1;
    }
    f->descr = Py_NewRef(descr);
    f->set = set;
    f->payload = kind == FIELD_ARG ? NULL : Py_NewRef(payload);
    f->convert = convert == Py_None ? NULL : Py_NewRef(convert);
    return 0;
}

static PyObject *slot_builder(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "slot_builder(cls, names, fields) takes 3 arguments");
        return NULL;
    }
    PyObject *cls = args[0], *names = args[1], *fields = args[2];
    if (!PyType_Check(cls) || ((PyTypeObject *)cls)->tp_new != PyBaseObject_Type.tp_new) {
        PyErr_SetString(PyExc_TypeError, "slot_builder needs a class whose __new__ is object's");
        return NULL;
    }
    if (!PyTuple_Check(names) || !PyTuple_Check(fields)) {
        PyErr_SetString(PyExc_TypeError, "names and fields must be tuples");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(names); i++)
        if (!PyUnicode_Check(PyTuple_GET_ITEM(names, i))) {
            PyErr_SetString(PyExc_TypeError, "every name must be a str");
            return NULL;
        }
    BuilderObject *b = PyObject_GC_New(BuilderObject, &BuilderType);
    if (b == NULL)
        return NULL;
    b->vectorcall = (vectorcallfunc)builder_call;
    b->cls = (PyTypeObject *)Py_NewRef(cls);
    b->names = Py_NewRef(names);
    b->empty = PyTuple_New(0);
    b->n_fields = 0;
    Py_ssize_t n = PyTuple_GET_SIZE(fields);
    b->fields = PyMem_Calloc(n ? (size_t)n : 1, sizeof(Field));
    if (b->empty == NULL || b->fields == NULL) {
        if (b->fields == NULL)
            PyErr_NoMemory();
        Py_DECREF(b);
        return NULL;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (builder_field(b, &b->fields[i], PyTuple_GET_ITEM(fields, i)) < 0) {
            Py_DECREF(b);
            return NULL;
        }
        b->n_fields = i + 1;
    }
    PyObject_GC_Track(b);
    return (PyObject *)b;
}

/* -- schema_walker: schema.metaschema's _fast_walk ------------------------------------ *
 *
 * walk(schema, rules, defaults=None) is _fast_walk, step for step: the same stack order
 * (so the same nodes in defaults, in the same order, and the same first limit error), the
 * commonest rules' VALID cases checked here, every other rule called as the Python walk
 * calls it, with a list for it to push subschemas onto (moved onto this stack after).
 * config is the tuple metaschema._compiled_walk gives: the rules checked here, the simple
 * type names, the limit exception, its two messages, the two limits and the Python walk.
 * A dict node with a key that is not exactly a str (never in parsed JSON) hands the whole
 * schema to the Python walk, from the start: such a key's __hash__ and __eq__ are Python
 * code, which could change the schema under the walk, and only the Python walk meets
 * that as Python does. Until then no Python code but the rules runs, so what was done
 * is what the Python walk does too. Every node on the stack, and each key and value
 * while it is looked at, is a strong reference all the same. A cold load walks every
 * manifest's schema: in Python, the walk was a fifth of the load's time. */

enum { W_STRING, W_TYPE, W_COUNT, W_MAP, W_SUB, W_NUMBER, W_ARRAY, W_STRING_ARRAY, W_SIMPLE, W_LIMIT,
       W_TOO_DEEP, W_TOO_BIG, W_MAX_DEPTH, W_MAX_SUBSCHEMAS, W_PYTHON, W_FIELDS };

/* walk_dict's answer for a node holding a key that is not exactly a str. */
#define WALK_FOREIGN (-2)

/* A stringArray ("required") checked here: a list of at most this many exact strs, unique. */
#define WALK_SHORT_LIST 16

static int walk_unique_strs(PyObject *list) {
    Py_ssize_t n = PyList_GET_SIZE(list);
    if (n > WALK_SHORT_LIST)
        return 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        if (!PyUnicode_CheckExact(item))
            return 0;
        for (Py_ssize_t j = 0; j < i; j++)
            if (PyUnicode_Compare(item, PyList_GET_ITEM(list, j)) == 0)
                return 0;
    }
    return 1;
}

typedef struct {
    PyObject *node;
    long depth;
} WalkItem;

typedef struct {
    WalkItem *items;
    Py_ssize_t top, cap;
    WalkItem small[64];
} WalkStack;

static int walk_push(WalkStack *s, PyObject *node, long depth) {
    if (s->top == s->cap) {
        Py_ssize_t want = s->cap * 2;
        WalkItem *grown = PyMem_Malloc((size_t)want * sizeof *grown);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(grown, s->items, (size_t)s->top * sizeof *grown);
        if (s->items != s->small)
            PyMem_Free(s->items);
        s->items = grown;
        s->cap = want;
    }
    Py_INCREF(node);
    s->items[s->top].node = node;
    s->items[s->top].depth = depth;
    s->top++;
    return 0;
}

static void walk_free(WalkStack *s) {
    while (s->top > 0)
        Py_DECREF(s->items[--s->top].node);
    if (s->items != s->small)
        PyMem_Free(s->items);
}

static void walk_limit(PyObject *const *config, int which) {
    PyObject *exc = PyObject_CallOneArg(config[W_LIMIT], config[which]);
    if (exc != NULL) {
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        Py_DECREF(exc);
    }
}

/* _unjudged: a plain JSON value of the wrong shape is INVALID, any other object DEFER. */
static long walk_unjudged(PyObject *value) {
    PyTypeObject *type = Py_TYPE(value);
    return type == &PyDict_Type || type == &PyList_Type || type == &PyUnicode_Type || type == &PyLong_Type ||
                   type == &PyFloat_Type || type == &PyBool_Type || value == Py_None
               ? 2
               : 1;
}

/* A rule the walk does not check itself: rule(value, depth, pushed), then what it pushed
 * moved onto the stack. The verdict, or -1 with an exception set. */
static long walk_call(PyObject *rule, PyObject *value, long depth, PyObject **pushed, WalkStack *s,
                      long *pushes) {
    if (*pushed == NULL && (*pushed = PyList_New(0)) == NULL)
        return -1;
    PyObject *depth_obj = PyLong_FromLong(depth);
    if (depth_obj == NULL)
        return -1;
    PyObject *call_args[3] = {value, depth_obj, *pushed};
    PyObject *found = PyObject_Vectorcall(rule, call_args, 3, NULL);
    Py_DECREF(depth_obj);
    if (found == NULL)
        return -1;
    long verdict = PyLong_AsLong(found);
    Py_DECREF(found);
    if (verdict == -1 && PyErr_Occurred())
        return -1;
    PyObject *list = *pushed;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        PyObject *item = PyList_GET_ITEM(list, i);
        long item_depth;
        if (!PyTuple_CheckExact(item) || PyTuple_GET_SIZE(item) != 2 ||
            ((item_depth = PyLong_AsLong(PyTuple_GET_ITEM(item, 1))) == -1 && PyErr_Occurred())) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "schema walk: a rule pushed something other than (node, depth)");
            return -1;
        }
        if (walk_push(s, PyTuple_GET_ITEM(item, 0), item_depth) < 0)
            return -1;
        *pushes += 1;
    }
    if (PyList_SetSlice(list, 0, PyList_GET_SIZE(list), NULL) < 0)
        return -1;
    return verdict;
}

/* One key of a dict node: its verdict (0 when a rule here vouched for it or none
 * applies), or -1 with an exception set. */
static long walk_key(PyObject *const *config, PyObject *rules, PyObject *key, PyObject *value, long depth,
                     PyObject **pushed, WalkStack *s, long *pushes) {
    PyObject *rule = PyDict_GetItemWithError(rules, key);
    if (rule == NULL)
        return PyErr_Occurred() ? -1 : 0;
    PyTypeObject *type = Py_TYPE(value);
    if (rule == config[W_STRING]) {
        if (type == &PyUnicode_Type)
            return 0;
    } else if (rule == config[W_TYPE]) {
        if (type == &PyUnicode_Type) {
            int simple = PySet_Contains(config[W_SIMPLE], value);
            if (simple < 0)
                return -1;
            if (simple)
                return 0;
        }
    } else if (rule == config[W_COUNT]) {
        if (type == &PyLong_Type) {
            int overflow;
            long number = PyLong_AsLongAndOverflow(value, &overflow);
            if (number == -1 && PyErr_Occurred())
                return -1;
            if (overflow > 0 || (overflow == 0 && number >= 0))
                return 0;
        }
    } else if (rule == config[W_MAP]) {
        if (type == &PyDict_Type) {
            Py_ssize_t pos = 0;
            PyObject *name, *sub;
            while (PyDict_Next(value, &pos, &name, &sub)) {
                if (walk_push(s, sub, depth + 2) < 0)
                    return -1;
                *pushes += 1;
            }
            return 0;
        }
    } else if (rule == config[W_SUB]) {
        if (walk_push(s, value, depth + 1) < 0)
            return -1;
        *pushes += 1;
        return 0;
    } else if (rule == config[W_NUMBER]) {
        if (type == &PyLong_Type || type == &PyFloat_Type)
            return 0;
    } else if (rule == config[W_ARRAY]) {
        if (type == &PyList_Type)
            return 0;
    } else if (rule == config[W_STRING_ARRAY]) {
        if (type == &PyList_Type && walk_unique_strs(value))
            return 0;
    }
    Py_INCREF(rule); /* the rules dict could lose it while it runs */
    long verdict = walk_call(rule, value, depth, pushed, s, pushes);
    Py_DECREF(rule);
    return verdict;
}

static PyObject *S_default;

/* The verdict for one dict node, -1 with an exception set, or WALK_FOREIGN. */
static long walk_dict(PyObject *const *config, PyObject *rules, PyObject *defaults, PyObject *node, long depth,
                      PyObject **pushed, WalkStack *s, long *pushes) {
    Py_ssize_t at = 0;
    PyObject *name;
    while (PyDict_Next(node, &at, &name, NULL))
        if (!PyUnicode_CheckExact(name))
            return WALK_FOREIGN;
    if (defaults != Py_None) {
        int has = PyDict_Contains(node, S_default);
        if (has < 0 || (has && PyList_Append(defaults, node) < 0))
            return -1;
    }
    long verdict = 0;
    Py_ssize_t pos = 0, size = PyDict_GET_SIZE(node);
    PyObject *key, *value;
    while (PyDict_Next(node, &pos, &key, &value)) {
        Py_INCREF(key);
        Py_INCREF(value);
        long found = walk_key(config, rules, key, value, depth, pushed, s, pushes);
        Py_DECREF(key);
        Py_DECREF(value);
        if (found < 0)
            return -1;
        if (found > verdict)
            verdict = found;
        if (PyDict_GET_SIZE(node) != size) {
            PyErr_SetString(PyExc_RuntimeError, "dictionary changed size during iteration");
            return -1;
        }
    }
    return verdict;
}

static PyObject *schema_walk(PyObject *config_tuple, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2 || nargs > 3 || !PyDict_CheckExact(args[1]) ||
        (nargs == 3 && args[2] != Py_None && !PyList_CheckExact(args[2]))) {
        PyErr_SetString(PyExc_TypeError, "walk(schema, rules, defaults=None): rules a dict, defaults a list");
        return NULL;
    }
    PyObject *const *config = &PyTuple_GET_ITEM(config_tuple, 0);
    PyObject *rules = args[1], *defaults = nargs == 3 ? args[2] : Py_None, *pushed = NULL;
    long max_depth = PyLong_AsLong(config[W_MAX_DEPTH]), budget = PyLong_AsLong(config[W_MAX_SUBSCHEMAS]);
    if (PyErr_Occurred())
        return NULL;
    Py_ssize_t found_before = defaults == Py_None ? 0 : PyList_GET_SIZE(defaults);
    long verdict = 0;
    WalkStack s;
    s.items = s.small;
    s.top = 0;
    s.cap = (Py_ssize_t)(sizeof s.small / sizeof s.small[0]);
    if (walk_push(&s, args[0], 0) < 0)
        goto fail;
    while (s.top > 0) {
        WalkItem item = s.items[--s.top];
        long found = 0, pushes = 0;
        if (item.depth > max_depth) {
            walk_limit(config, W_TOO_DEEP);
            found = -1;
        } else if (PyDict_CheckExact(item.node)) {
            found = walk_dict(config, rules, defaults, item.node, item.depth, &pushed, &s, &pushes);
            /* pushes, not pops, bound the work even when one node is shared by a huge allOf */
            budget -= pushes;
            if (found >= 0 && budget < 0) {
                walk_limit(config, W_TOO_BIG);
                found = -1;
            }
        } else if (item.node != Py_True && item.node != Py_False) {
            found = walk_unjudged(item.node);
        }
        Py_DECREF(item.node);
        if (found == WALK_FOREIGN)
            goto python;
        if (found < 0)
            goto fail;
        if (found > verdict)
            verdict = found;
    }
    walk_free(&s);
    Py_XDECREF(pushed);
    return PyLong_FromLong(verdict);
python: /* the whole walk again in Python, defaults back to what they held before it */
    walk_free(&s);
    Py_XDECREF(pushed);
    if (defaults != Py_None && PyList_SetSlice(defaults, found_before, PyList_GET_SIZE(defaults), NULL) < 0)
        return NULL;
    return PyObject_Vectorcall(config[W_PYTHON], args, (size_t)nargs, NULL);
fail:
    walk_free(&s);
    Py_XDECREF(pushed);
    return NULL;
}

static PyMethodDef schema_walk_def = {
    "walk", (PyCFunction)(void (*)(void))schema_walk, METH_FASTCALL,
    "walk(schema, rules, defaults=None, /)\n--\n\n"
    "schema.metaschema._fast_walk: the worst verdict over every subschema (raises the limit error).",
};

static PyObject *schema_walker(PyObject *module, PyObject *config) {
    (void)module;
    if (!PyTuple_CheckExact(config) || PyTuple_GET_SIZE(config) != W_FIELDS ||
        !PyAnySet_Check(PyTuple_GET_ITEM(config, W_SIMPLE)) || !PyCallable_Check(PyTuple_GET_ITEM(config, W_LIMIT)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(config, W_MAX_DEPTH)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(config, W_MAX_SUBSCHEMAS)) ||
        !PyCallable_Check(PyTuple_GET_ITEM(config, W_PYTHON)))
        return PyErr_Format(PyExc_TypeError,
                            "schema_walker(config): config is (string, type, count, subschema_map, subschema, "
                            "number, array, string_array, simple_types, limit_error, too_deep, too_big, max_depth, "
                            "max_subschemas, python_walk)");
    if (S_default == NULL && (S_default = PyUnicode_InternFromString("default")) == NULL)
        return NULL;
    return PyCFunction_NewEx(&schema_walk_def, config, NULL);
}

/* -- unique_object: the manifest parser's object_pairs_hook --------------------------- *
 *
 * dict(pairs), or ValueError naming the first key that repeats an earlier one (what
 * loaders.skill_json_parse._unique_object raises): called for every JSON object of every
 * manifest a load parses. */
static PyObject *unique_object(PyObject *module, PyObject *pairs) {
    (void)module;
    PyObject *seq = PySequence_Fast(pairs, "unique_object(pairs): pairs must be a list");
    if (seq == NULL)
        return NULL;
    PyObject *obj = PyDict_New(), *seen = NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (obj == NULL || PyDict_MergeFromSeq2(obj, seq, 1) < 0)
        goto done;
    if (PyDict_GET_SIZE(obj) == n) {
        Py_DECREF(seq);
        return obj;
    }
    if ((seen = PySet_New(NULL)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PySequence_GetItem(PySequence_Fast_GET_ITEM(seq, i), 0);
        int known = key == NULL ? -1 : PySet_Contains(seen, key);
        if (known == 0)
            known = PySet_Add(seen, key);
        if (known == 1)
            PyErr_Format(PyExc_ValueError, "duplicate key \"%S\" (two parsers could read two different manifests)",
                         key);
        Py_XDECREF(key);
        if (known != 0)
            break;
    }
    if (!PyErr_Occurred()) /* dict() dropped a pair no set sees again: a key whose hash or == changes */
        PyErr_SetString(PyExc_ValueError, "duplicate key (two parsers could read two different manifests)");
done:
    Py_XDECREF(seen);
    Py_XDECREF(obj);
    Py_DECREF(seq);
    return NULL;
}

/* -- manifest_fields: loaders.skill_json's field checks, for the plain manifest -------- *
 *
 * fields(data) is (name, description, entry, env_allow, timeout, tool_class, category) when
 * every field of the manifest dict data passes build_skill's checks the plain way, else
 * None (build_skill then checks it in Python, which words every problem). Plain means:
 * every key a known field (config's frozenset) and none "sandbox"; "name" a str of 1 to
 * max_name characters, each [a-z0-9_]; "description" a str with a character that is not
 * whitespace and is printable; "entry" such a str naming a file of the manifest's own folder (no "/", not
 * "." or "..", no NUL); "env_allow" absent (an empty tuple) or a list of str names
 * [A-Za-z_][A-Za-z0-9_]*, at most max_env of them once repeats are dropped (a tuple, each
 * name once, first place kept, found through a set: no scan per name); "timeout_seconds"
 * absent (None) or an int from 0 to max_timeout; "class" absent or a str key of config's
 * classes (its value is returned); "category" absent or a str ("external" when absent or
 * empty). Only exact dict, str, int and list objects are read, so no Python code runs.
 * The schema, the entry's file and the skill itself are left to the caller. */
enum { MF_KNOWN, MF_CLASSES, MF_MAX_NAME, MF_MAX_TIMEOUT, MF_MAX_ENV, MF_FIELDS };

static PyObject *MF_name, *MF_description, *MF_entry, *MF_env_allow, *MF_timeout, *MF_class, *MF_category,
    *MF_sandbox, *MF_external;

/* The exact str at data[key], NULL when absent or another type (*error set on an error). */
static PyObject *mf_str(PyObject *data, PyObject *key, int *absent, int *error) {
    PyObject *value = PyDict_GetItemWithError(data, key);
    *absent = value == NULL;
    if (value == NULL) {
        *error = PyErr_Occurred() != NULL;
        return NULL;
    }
    if (!PyUnicode_CheckExact(value))
        return NULL;
    if (PyUnicode_READY(value) < 0) { /* a legacy string (3.11) */
        *error = 1;
        return NULL;
    }
    return value;
}

/* str.strip() leaves something: a character that is not whitespace; with visible, one that is
 * printable too (loaders.skill_json.visible: a zero-width space is no description). */
static int mf_has_text(PyObject *s, int visible) {
    int kind = PyUnicode_KIND(s);
    const void *chars = PyUnicode_DATA(s);
    for (Py_ssize_t i = 0, n = PyUnicode_GET_LENGTH(s); i < n; i++) {
        Py_UCS4 ch = PyUnicode_READ(kind, chars, i);
        if (!Py_UNICODE_ISSPACE(ch) && (!visible || Py_UNICODE_ISPRINTABLE(ch)))
            return 1;
    }
    return 0;
}

/* NAME_RE.fullmatch(s) ([a-z0-9_]+), or with env ENV_NAME_RE's ([A-Za-z_][A-Za-z0-9_]*). */
static int mf_word(PyObject *s, int env) {
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    if (n == 0 || !PyUnicode_IS_ASCII(s))
        return 0;
    const Py_UCS1 *c = PyUnicode_1BYTE_DATA(s);
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS1 ch = c[i];
        int lower = ch >= 'a' && ch <= 'z', digit = ch >= '0' && ch <= '9', upper = ch >= 'A' && ch <= 'Z';
        if (!(ch == '_' || lower || (digit && !(env && i == 0)) || (env && upper)))
            return 0;
    }
    return 1;
}

/* "env_allow" as a tuple of its names, each once; Py_None when it is not plain (more than
 * max_env distinct names included: the Python checks word that error), NULL on an error. */
static PyObject *mf_env_allow(PyObject *data, Py_ssize_t max_env) {
    PyObject *value = PyDict_GetItemWithError(data, MF_env_allow);
    if (value == NULL)
        return PyErr_Occurred() ? NULL : PyTuple_New(0);
    if (!PyList_CheckExact(value))
        Py_RETURN_NONE;
    PyObject *names = PyList_New(0), *seen = PySet_New(NULL), *result = NULL;
    if (names == NULL || seen == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(value); i++) {
        PyObject *item = PyList_GET_ITEM(value, i);
        if (PyUnicode_CheckExact(item) && PyUnicode_READY(item) < 0)
            goto done;
        if (!PyUnicode_CheckExact(item) || !mf_word(item, 1)) {
            result = Py_NewRef(Py_None);
            goto done;
        }
        int in = PySet_Contains(seen, item); /* an exact str: its own hash and equality */
        if (in < 0 || (!in && (PySet_Add(seen, item) < 0 || PyList_Append(names, item) < 0)))
            goto done;
        if (PyList_GET_SIZE(names) > max_env) {
            result = Py_NewRef(Py_None);
            goto done;
        }
    }
    result = PyList_AsTuple(names);
done:
    Py_XDECREF(names);
    Py_XDECREF(seen);
    return result;
}

static PyObject *manifest_fields_call(PyObject *config, PyObject *data) {
    if (!PyDict_CheckExact(data))
        Py_RETURN_NONE;
    PyObject *known = PyTuple_GET_ITEM(config, MF_KNOWN), *key, *value;
    Py_ssize_t pos = 0;
    while (PyDict_Next(data, &pos, &key, &value)) {
        if (!PyUnicode_CheckExact(key))
            Py_RETURN_NONE;
        int in = PySet_Contains(known, key);
        if (in <= 0)
            return in < 0 ? NULL : Py_NewRef(Py_None);
    }
    int absent, error = 0;
    if (PyDict_GetItemWithError(data, MF_sandbox) != NULL || PyErr_Occurred())
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *name = mf_str(data, MF_name, &absent, &error);
    PyObject *description = error ? NULL : mf_str(data, MF_description, &absent, &error);
    PyObject *entry = error ? NULL : mf_str(data, MF_entry, &absent, &error);
    if (error)
        return NULL;
    if (name == NULL || description == NULL || entry == NULL || !mf_word(name, 0) ||
        PyUnicode_GET_LENGTH(name) > PyLong_AsSsize_t(PyTuple_GET_ITEM(config, MF_MAX_NAME)) ||
        !mf_has_text(description, 1) || !mf_has_text(entry, 0) || PyUnicode_FindChar(entry, '/', 0, PY_SSIZE_T_MAX, 1) != -1 ||
        PyUnicode_FindChar(entry, 0, 0, PY_SSIZE_T_MAX, 1) != -1 || PyUnicode_CompareWithASCIIString(entry, ".") == 0 ||
        PyUnicode_CompareWithASCIIString(entry, "..") == 0)
        Py_RETURN_NONE;
    PyObject *timeout = PyDict_GetItemWithError(data, MF_timeout);
    if (timeout == NULL && PyErr_Occurred())
        return NULL;
    if (timeout != NULL) {
        int overflow;
        long long seconds = PyLong_CheckExact(timeout) ? PyLong_AsLongLongAndOverflow(timeout, &overflow) : -1;
        if (!PyLong_CheckExact(timeout) || overflow != 0 || seconds < 0 ||
            seconds > PyLong_AsLongLong(PyTuple_GET_ITEM(config, MF_MAX_TIMEOUT)))
            Py_RETURN_NONE;
    }
    PyObject *kind = mf_str(data, MF_class, &absent, &error);
    if (error)
        return NULL;
    if (!absent && kind == NULL)
        Py_RETURN_NONE;
    PyObject *tool_class = PyDict_GetItemWithError(PyTuple_GET_ITEM(config, MF_CLASSES), absent ? A_empty : kind);
    if (tool_class == NULL)
        return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
    PyObject *category = mf_str(data, MF_category, &absent, &error);
    if (error)
        return NULL;
    if (!absent && category == NULL)
        Py_RETURN_NONE;
    if (absent || PyUnicode_GET_LENGTH(category) == 0)
        category = MF_external;
    PyObject *env_allow = mf_env_allow(data, PyLong_AsSsize_t(PyTuple_GET_ITEM(config, MF_MAX_ENV)));
    if (env_allow == NULL || env_allow == Py_None)
        return env_allow;
    PyObject *fields = PyTuple_Pack(7, name, description, entry, env_allow, timeout != NULL ? timeout : Py_None,
                                    tool_class, category);
    Py_DECREF(env_allow);
    return fields;
}

static PyMethodDef manifest_fields_def = {
    "fields", (PyCFunction)manifest_fields_call, METH_O,
    "fields(data, /)\n--\n\n"
    "loaders.skill_json's field checks for a plain manifest: (name, description, entry, env_allow,\n"
    "timeout, tool_class, category), or None (check it in Python).",
};

static PyObject *manifest_fields(PyObject *module, PyObject *config) {
    (void)module;
    if (!PyTuple_CheckExact(config) || PyTuple_GET_SIZE(config) != MF_FIELDS ||
        !PyFrozenSet_CheckExact(PyTuple_GET_ITEM(config, MF_KNOWN)) ||
        !PyDict_CheckExact(PyTuple_GET_ITEM(config, MF_CLASSES)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(config, MF_MAX_NAME)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(config, MF_MAX_TIMEOUT)) ||
        !PyLong_CheckExact(PyTuple_GET_ITEM(config, MF_MAX_ENV)))
        return PyErr_Format(PyExc_TypeError,
                            "manifest_fields(config): config is (known fields: frozenset, classes: dict, "
                            "max_name: int, max_timeout: int, max_env: int)");
    struct {
        PyObject **slot;
        const char *text;
    } names[] = {{&MF_name, "name"},       {&MF_description, "description"}, {&MF_entry, "entry"},
                 {&MF_env_allow, "env_allow"}, {&MF_timeout, "timeout_seconds"}, {&MF_class, "class"},
                 {&MF_category, "category"}, {&MF_sandbox, "sandbox"},         {&MF_external, "external"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (*names[i].slot == NULL && (*names[i].slot = PyUnicode_InternFromString(names[i].text)) == NULL)
            return NULL;
    return PyCFunction_NewEx(&manifest_fields_def, config, NULL);
}

/* -- list_folder: the skill loader's listing of one folder ----------------------------- *
 *
 * list_folder(folder, names, skip_dirs, skip_prefix) is loader._list_folder's listing,
 * read with opendir/readdir: ((name, not_regular) of every entry named in names, whatever
 * its type (a symlink, FIFO or folder is checked, and logged, when read), the names of
 * the sub-folders to walk (one of a manifest's name too): not symlinks, not in
 * skip_dirs, not starting with skip_prefix), each sorted by name; OSError as os.scandir
 * raises it. None when an entry's type is not in its directory entry (DT_UNKNOWN: some
 * file systems), the path holds a NUL, or an argument is not of the exact type above (a
 * path object, a set): the Python listing, which stats, then decides.
 * Every folder of every root is listed once a cold load: os.scandir's DirEntry objects,
 * the sort by attribute and the Python loop over them cost about as much as the system
 * calls. The directory is read with the GIL released, as os.scandir reads it. */
typedef struct {
    unsigned char type;
    size_t at; /* offset of the NUL-terminated name in the names buffer */
} LfEntry;

static PyObject *list_folder(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    (void)module;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "list_folder(folder, names, skip_dirs, skip_prefix)");
        return NULL;
    }
    if (!PyUnicode_CheckExact(args[0]) || !PyFrozenSet_CheckExact(args[1]) || !PyFrozenSet_CheckExact(args[2]) ||
        !PyUnicode_CheckExact(args[3]))
        Py_RETURN_NONE; /* a path object, a set: the Python listing takes what os.scandir takes */
    PyObject *folder = args[0], *names = args[1], *skip_dirs = args[2], *skip_prefix = args[3];
    PyObject *path = PyUnicode_EncodeFSDefault(folder);
    if (path == NULL)
        return NULL;
    const char *raw = PyBytes_AS_STRING(path);
    if (strlen(raw) != (size_t)PyBytes_GET_SIZE(path)) { /* a NUL: os.scandir's ValueError */
        Py_DECREF(path);
        Py_RETURN_NONE;
    }
    LfEntry *entries = NULL;
    char *text = NULL;
    size_t count = 0, cap = 0, used = 0, room = 0;
    int err = 0, unknown = 0, nomem = 0;
    Py_BEGIN_ALLOW_THREADS
    DIR *dir = opendir(raw);
    if (dir == NULL)
        err = errno;
    while (dir != NULL) {
        errno = 0;
        struct dirent *d = readdir(dir);
        if (d == NULL) {
            err = errno;
            break;
        }
        const char *n = d->d_name;
        if (n[0] == '.' && (n[1] == 0 || (n[1] == '.' && n[2] == 0)))
            continue;
        if (d->d_type == DT_UNKNOWN) {
            unknown = 1;
            break;
        }
        size_t len = strlen(n) + 1;
        if (count == cap) {
            LfEntry *grown = PyMem_RawRealloc(entries, (cap ? cap * 2 : 16) * sizeof *entries);
            if (grown == NULL) {
                nomem = 1;
                break;
            }
            entries = grown;
            cap = cap ? cap * 2 : 16;
        }
        if (used + len > room) {
            char *grown = PyMem_RawRealloc(text, (used + len) * 2);
            if (grown == NULL) {
                nomem = 1;
                break;
            }
            text = grown;
            room = (used + len) * 2;
        }
        memcpy(text + used, n, len);
        entries[count].type = d->d_type;
        entries[count].at = used;
        count++;
        used += len;
    }
    if (dir != NULL)
        closedir(dir);
    Py_END_ALLOW_THREADS
    PyObject *files = NULL, *subdirs = NULL, *answer = NULL;
    if (nomem) {
        PyErr_NoMemory();
        goto done;
    }
    if (err != 0) {
        errno = err;
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, folder);
        goto done;
    }
    if (unknown) {
        answer = Py_NewRef(Py_None);
        goto done;
    }
    if ((files = PyList_New(0)) == NULL || (subdirs = PyList_New(0)) == NULL)
        goto done;
    for (size_t i = 0; i < count; i++) {
        unsigned char type = entries[i].type;
        PyObject *name = PyUnicode_DecodeFSDefault(text + entries[i].at);
        if (name == NULL)
            goto done;
        int claimed = PySet_Contains(names, name), rc = 0;
        if (claimed == 1) {
            PyObject *pair = PyTuple_Pack(2, name, type == DT_REG ? Py_False : Py_True);
            rc = pair == NULL ? -1 : PyList_Append(files, pair);
            Py_XDECREF(pair);
            if (rc == 0 && type == DT_DIR) /* a folder of a manifest's name is walked too */
                rc = PyList_Append(subdirs, name);
        } else if (claimed == 0 && type == DT_DIR) {
            int skipped = PySet_Contains(skip_dirs, name);
            Py_ssize_t prefixed = skipped ? 0 : PyUnicode_Tailmatch(name, skip_prefix, 0, PY_SSIZE_T_MAX, -1);
            rc = skipped < 0 || prefixed < 0 ? -1 : skipped || prefixed ? 0 : PyList_Append(subdirs, name);
        }
        Py_DECREF(name);
        if (claimed < 0 || rc < 0)
            goto done;
    }
    if (PyList_Sort(files) < 0 || PyList_Sort(subdirs) < 0)
        goto done;
    {
        PyObject *f = PyList_AsTuple(files), *s = f == NULL ? NULL : PyList_AsTuple(subdirs);
        if (s != NULL)
            answer = PyTuple_Pack(2, f, s);
        Py_XDECREF(f);
        Py_XDECREF(s);
    }
done:
    Py_XDECREF(files);
    Py_XDECREF(subdirs);
    PyMem_RawFree(entries);
    PyMem_RawFree(text);
    Py_DECREF(path);
    return answer;
}

static PyMethodDef methods[] = {
    {"sha256_hex", (PyCFunction)sha256_hex, METH_O,
     "sha256_hex(data, /)\n--\n\n"
     "hashlib.sha256(data).hexdigest() for bytes, or a str's UTF-8 (UnicodeEncodeError as\n"
     "str.encode raises it)."},
    {"sha256_hex_portable", (PyCFunction)sha256_hex_portable, METH_O,
     "sha256_hex_portable(data, /)\n--\n\n"
     "sha256_hex without the CPU's SHA extensions (what other machines run; for tests)."},
    {"audit_finisher", (PyCFunction)audit_finisher, METH_O,
     "audit_finisher(fallback, /)\n--\n\n"
     "finish(...): audit.rows.finish_row in C for the common row (None for the others); fallback\n"
     "is the Python canonical JSON encoder, as for canonical_encoder."},
    {"audit_starter", (PyCFunction)(void (*)(void))audit_starter, METH_FASTCALL,
     "audit_starter(fallback, names, /)\n--\n\n"
     "start(started, request): audit.rows.start_row's head in C for a call whose arguments'\n"
     "text is ASCII and names none of names (bytes, lowercase), else None."},
    {"slot_builder", (PyCFunction)(void (*)(void))slot_builder, METH_FASTCALL,
     "slot_builder(cls, names, fields, /)\n--\n\n"
     "build(*values): object.__new__(cls), then each field set through its slot's descriptor\n"
     "(fields: (descriptor, kind, payload, converter) each; models.fastinit)."},
    {"light", (PyCFunction)(void (*)(void))light, METH_FASTCALL,
     "light(args, budget, /)\n--\n\n"
     "Whether args cost at most budget to walk (schema.arguments.is_light); None when a\n"
     "value is not a plain JSON type (the Python walk decides then)."},
    {"same_files", (PyCFunction)same_files, METH_O,
     "same_files(stamps, /)\n--\n\n"
     "Whether every (path, st_dev, st_ino) still stats to that file ((path, None, None):\n"
     "stat fails); None when a path cannot be checked here (not UTF-8, a NUL)."},
    {"same_mtimes", (PyCFunction)same_mtimes, METH_O,
     "same_mtimes(stamps, /)\n--\n\n"
     "Whether every (path, st_mtime_ns) still stats to that time; None as for same_files."},
    {"canonical_encoder", (PyCFunction)canonical_encoder, METH_O,
     "canonical_encoder(fallback, /)\n--\n\n"
     "A canonical JSON encoder that hands values it does not know to fallback(value)."},
    {"schema_walker", (PyCFunction)schema_walker, METH_O,
     "schema_walker(config, /)\n--\n\n"
     "walk(schema, rules, defaults=None): schema.metaschema._fast_walk in C (config: see\n"
     "metaschema._compiled_walk)."},
    {"list_folder", (PyCFunction)(void (*)(void))list_folder, METH_FASTCALL,
     "list_folder(folder, names, skip_dirs, skip_prefix, /)\n--\n\n"
     "loader._list_folder's (files, sub-folders) of folder, read with readdir; None when an\n"
     "entry's type is unknown, the path holds a NUL or an argument is not of the exact type\n"
     "(the Python listing then decides)."},
    {"manifest_fields", (PyCFunction)manifest_fields, METH_O,
     "manifest_fields(config, /)\n--\n\n"
     "fields(data): loaders.skill_json's field checks in C for a plain manifest (config: see\n"
     "skill_json._compiled_fields)."},
    {"unique_object", (PyCFunction)unique_object, METH_O,
     "unique_object(pairs, /)\n--\n\n"
     "dict(pairs), or ValueError naming the first repeated key (the manifest parser's\n"
     "object_pairs_hook)."},
    {"write_all", (PyCFunction)(void (*)(void))write_all, METH_FASTCALL,
     "write_all(fd, data, /)\n--\n\n"
     "Write all of data to fd, keeping the GIL (for a local file); OSError on failure."},
    {NULL, NULL, 0, NULL},
};

static int speedups_exec(PyObject *module) {
    init_escape();
    if (has_sha_ni())
        sha_blocks = sha_blocks_ni;
    if (intern_names() < 0)
        return -1;
    if (PyModule_AddIntConstant(module, "SHA_NI", sha_blocks != sha_blocks_portable) < 0)
        return -1;
    return PyModule_AddType(module, &BuilderType);
}

static PyModuleDef_Slot slots[] = {
    {Py_mod_exec, speedups_exec},
    {0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "ongrid_plugins._speedups",
    .m_doc = "Compiled helpers of the call path and the load (see _speedups.c).",
    .m_size = 0,
    .m_methods = methods,
    .m_slots = slots,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModuleDef_Init(&speedups_module); }
