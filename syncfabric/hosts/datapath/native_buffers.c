/* The arguments of the native data path's calls, checked before any byte is touched:
 * buffers of the right element type, contiguous, aligned and large enough (sizes
 * multiplied with overflow checks), wire fields in 32 bits, and a job's layout whose
 * fragment count agrees with its floats. A misuse raises ValueError or TypeError. */

#include "native.h"

/* Each Element's struct format characters (numpy's int64 is 'l' on LP64), item size
 * and name. */
static const struct {
    const char *codes;
    Py_ssize_t size;
    const char *name;
} ELEMENTS[] = {
    [BYTES] = {"Bbc", 1, "bytes"},   [INT8] = {"b", 1, "int8"},
    [BOOL] = {"?", 1, "bool"},       [UINT16] = {"H", 2, "uint16"},
    [UINT32] = {"I", 4, "uint32"},   [INT64] = {"lq", 8, "int64"},
    [UINT64] = {"LQ", 8, "uint64"},  [FLOAT32] = {"f", 4, "float32"},
};

/* Whether `view`'s format is `element`: one character of its codes, in native or
 * little-endian standard form (the only byte order these loops read). */
static int format_is(const Py_buffer *view, Element element)
{
    const char *format = view->format ? view->format : "B";
    if (*format == '@' || *format == '=' || *format == '<')
        format++;
    return view->itemsize == ELEMENTS[element].size && format[0] != '\0' && format[1] == '\0'
        && strchr(ELEMENTS[element].codes, format[0]) != NULL;
}

/* A writable or read-only buffer of at least `items` elements of `element`, C-contiguous
 * and aligned for it; -1 with an error set (nothing held) otherwise. */
int get_buffer(PyObject *object, Py_buffer *view, int writable, Element element,
               Py_ssize_t items, const char *name)
{
    Py_ssize_t size = ELEMENTS[element].size, needed;
    if (items < 0) {
        PyErr_Format(PyExc_ValueError, "%s: a negative number of items (%zd)", name, items);
        return -1;
    }
    if (__builtin_mul_overflow(items, size, &needed)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd items of %zd bytes overflow", name, items, size);
        return -1;
    }
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(object, view, flags) < 0)
        return -1;
    if (!format_is(view, element)) {
        PyErr_Format(PyExc_TypeError, "%s holds items of format '%s', not %s", name,
                     view->format ? view->format : "B", ELEMENTS[element].name);
        PyBuffer_Release(view);
        return -1;
    }
    if ((uintptr_t)view->buf % (uintptr_t)size) {
        PyErr_Format(PyExc_ValueError, "%s is not aligned for %s", name, ELEMENTS[element].name);
        PyBuffer_Release(view);
        return -1;
    }
    if (view->len < needed) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, %zd needed", name, view->len, needed);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* `object`'s buffer (get_buffer's), held as the next of `held`; NULL with an error set. */
Py_buffer *hold(Held *held, PyObject *object, int writable, Element element, Py_ssize_t items,
                const char *name)
{
    if (held->count >= HELD_BUFFERS) {
        PyErr_SetString(PyExc_SystemError, "a native call holds too many buffers");
        return NULL;
    }
    Py_buffer *view = &held->view[held->count];
    if (get_buffer(object, view, writable, element, items, name) < 0)
        return NULL;
    held->count++;
    return view;
}

void release_held(Held *held)
{
    while (held->count > 0)
        PyBuffer_Release(&held->view[--held->count]);
}

/* 0 if datagrams first..stop-1 (offsets[i], lengths[i], int64) lie in `buffer`, each at
 * most `longest` bytes; -1 with an error set if one does not. */
int datagrams_in(const Py_buffer *buffer, const Py_buffer *offsets, const Py_buffer *lengths,
                 Py_ssize_t first, Py_ssize_t stop, int64_t longest)
{
    const int64_t *offset = offsets->buf, *length = lengths->buf;
    for (Py_ssize_t i = first; i < stop; i++) {
        int64_t end;
        if (offset[i] < 0 || length[i] < 0 || length[i] > longest
            || __builtin_add_overflow(offset[i], length[i], &end) || end > buffer->len) {
            PyErr_SetString(PyExc_ValueError, "a datagram lies outside the buffer");
            return -1;
        }
    }
    return 0;
}

/* Hold a received batch (buffer, offsets, lengths, sources: receive's, n datagrams) in
 * `held` (its first four buffers), and check every datagram lies in the buffer. */
int hold_batch(Held *held, PyObject *buffer, PyObject *offsets, PyObject *lengths,
               PyObject *sources, Py_ssize_t n)
{
    Py_buffer *data, *offset, *length;
    if (!(data = hold(held, buffer, 0, BYTES, 0, "buffer"))
        || !(offset = hold(held, offsets, 0, INT64, n, "offsets"))
        || !(length = hold(held, lengths, 0, INT64, n, "lengths"))
        || !hold(held, sources, 0, UINT32, n, "sources"))
        return -1;
    return datagrams_in(data, offset, length, 0, n, INT64_MAX);
}

/* "O&" converter: an integer in 0..2**32-1, as the wire's 32-bit fields (job, round,
 * fragment count, index, IPv4 address) hold; ValueError or TypeError otherwise. */
int uint32_arg(PyObject *object, void *out)
{
    PyObject *index = PyNumber_Index(object);
    if (index == NULL)
        return 0;
    int overflow;
    long long value = PyLong_AsLongLongAndOverflow(index, &overflow);
    Py_DECREF(index);
    if (value == -1 && PyErr_Occurred())
        return 0;
    if (overflow || value < 0 || value > (long long)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError,
                        "a wire field (job, round, count, index, address) lies outside "
                        "0..2**32-1: the wire carries 32 bits");
        return 0;
    }
    *(uint32_t *)out = (uint32_t)value;
    return 1;
}

/* 0 if a job of `floats` floats, per_fragment a fragment, has exactly `count` fragments
 * (gradient_wire.fragment_count), so every fragment carries at least one float; -1 with
 * ValueError otherwise. */
int check_layout(uint32_t count, Py_ssize_t per_fragment, Py_ssize_t floats)
{
    if (per_fragment < 1 || floats < 0) {
        PyErr_Format(PyExc_ValueError, "a layout of %zd floats, %zd a fragment: both must be "
                     "positive", floats, per_fragment);
        return -1;
    }
    if ((Py_ssize_t)count != floats / per_fragment + (floats % per_fragment != 0)) {
        PyErr_Format(PyExc_ValueError, "%u fragments of %zd floats cannot hold exactly %zd "
                     "floats", count, per_fragment, floats);
        return -1;
    }
    return 0;
}

/* Hold `object`'s rounds: each float32 array of at least `floats`, each have array of
 * `fragments` items of `have` (uint64 masks, or bools). -1 with an error set
 * (release_rounds still releases what was held). */
int hold_rounds(PyObject *object, Rounds *rounds, Py_ssize_t floats, Element have,
                Py_ssize_t fragments)
{
    rounds->ready = rounds->count = 0;
    rounds->round = NULL;
    rounds->list = PySequence_Fast(object, "rounds must be a sequence");
    if (rounds->list == NULL)
        return -1;
    rounds->count = PySequence_Fast_GET_SIZE(rounds->list);
    rounds->round = PyMem_Calloc(rounds->count ? rounds->count : 1, sizeof(KeptRound));
    if (rounds->round == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (; rounds->ready < rounds->count; rounds->ready++) {
        KeptRound *round = &rounds->round[rounds->ready];
        PyObject *entry = PySequence_Fast_GET_ITEM(rounds->list, rounds->ready), *values, *seen;
        if (!PyArg_ParseTuple(entry, "O&OO", uint32_arg, &round->number, &values, &seen))
            return -1;
        if (get_buffer(values, &round->sums, 1, FLOAT32, floats, "a round's floats") < 0)
            return -1;
        if (get_buffer(seen, &round->have, 1, have, fragments, "have") < 0) {
            PyBuffer_Release(&round->sums);
            return -1;
        }
    }
    return 0;
}

void release_rounds(Rounds *rounds)
{
    for (Py_ssize_t r = 0; r < rounds->ready; r++) {
        PyBuffer_Release(&rounds->round[r].sums);
        PyBuffer_Release(&rounds->round[r].have);
    }
    PyMem_Free(rounds->round);
    Py_XDECREF(rounds->list);
}

/* [each round's `received`]: what a call counted per round. */
PyObject *received_per_round(Rounds *rounds)
{
    PyObject *list = PyList_New(rounds->count);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r < rounds->count; r++) {
        PyObject *count = PyLong_FromLongLong(rounds->round[r].received);
        if (count == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, r, count);
    }
    return list;
}
