/* What the native data path's C files share (native.py drives them; python.py is the
 * reference for every rule): the wire's sizes, the checked arguments and buffers a call
 * holds (native_buffers.c), and the byte-order loops. Every value that comes from the
 * network or from a caller is checked before it is used: see docs/security.md. */

#ifndef SYNCFABRIC_NATIVE_H
#define SYNCFABRIC_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

/* The wire's header fields are big-endian (load_be32 and the rest), its float32s
 * little-endian: this host's order, so they are summed where they lie and sent from the
 * caller's array. setup.py builds this extension only where that holds. */
#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the wire's float32s are little-endian: the native data path reads them in place"
#endif

#define HEADER_BYTES 24          /* job, round, fragment, count (4 bytes each), mask (8) */
#define MAX_MESSAGES 64          /* per recvmmsg / sendmmsg call */
#define GSO_SEND_SEGMENTS 64     /* segments of one GSO send: what every kernel takes */
#define MOST_SEGMENTS 128        /* segments of one received GRO datagram at most: the
                                    kernel's UDP_MAX_SEGMENTS since 6.10 (64 before) */
#define UDP_MAX_PAYLOAD 65507
#define BLOCK_FRAGMENTS 64       /* core_split.BLOCK_FRAGMENTS: no GSO run spans two blocks */
#define HELD_BUFFERS 12          /* the most buffers one call holds */

enum status { ADDED = 0, COMPLETED = 1, DROPPED = 2, REPEATED = 3, TO_PYTHON = 4,
              OUT_OF_WINDOW = 5 };

/* The element types the calls read and write; a buffer must be of its type, contiguous
 * and aligned for it (get_buffer), or the call raises before it touches a byte. */
typedef enum { BYTES, INT8, BOOL, UINT16, UINT32, INT64, UINT64, FLOAT32 } Element;

/* The buffers a call holds, released together (release_held). */
typedef struct {
    Py_buffer view[HELD_BUFFERS];
    int count;
} Held;

/* One round of a call, held: its number, its float32 array (a summing node's sums, a
 * worker's result) and its have array (uint64 masks, or bools), and what the call
 * counted in it (bytes received, or sums placed). */
typedef struct {
    uint32_t number;
    Py_buffer sums, have;
    int64_t received;
} KeptRound;

/* A call's rounds, [(number, float32 array, have array)], held as buffers. */
typedef struct {
    PyObject *list;
    KeptRound *round;
    Py_ssize_t count, ready;   /* rounds given; rounds whose buffers are held */
} Rounds;

/* native_buffers.c */
int get_buffer(PyObject *object, Py_buffer *view, int writable, Element element,
               Py_ssize_t items, const char *name);
Py_buffer *hold(Held *held, PyObject *object, int writable, Element element, Py_ssize_t items,
                const char *name);
void release_held(Held *held);
int datagrams_in(const Py_buffer *buffer, const Py_buffer *offsets, const Py_buffer *lengths,
                 Py_ssize_t first, Py_ssize_t stop, int64_t longest);
int hold_batch(Held *held, PyObject *buffer, PyObject *offsets, PyObject *lengths,
               PyObject *sources, Py_ssize_t n);
int uint32_arg(PyObject *object, void *out);
int check_layout(uint32_t count, Py_ssize_t per_fragment, Py_ssize_t floats);
int hold_rounds(PyObject *object, Rounds *rounds, Py_ssize_t floats, Element have,
                Py_ssize_t fragments);
void release_rounds(Rounds *rounds);
PyObject *received_per_round(Rounds *rounds);

/* native_floats.c: the wire's float32s summed */
void add_floats(float *restrict sums, const unsigned char *restrict payload, Py_ssize_t n);

/* the entry points (native_receive.c, native_send.c, native_sum.c) */
PyObject *recv_batch(PyObject *self, PyObject *args);
PyObject *cut_messages(PyObject *self, PyObject *args);
PyObject *send_batch(PyObject *self, PyObject *args);
PyObject *build_fragments(PyObject *self, PyObject *args);
PyObject *sum_fragments(PyObject *self, PyObject *args);
PyObject *place_sums(PyObject *self, PyObject *args);

static inline uint32_t load_be32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}

static inline uint64_t load_be64(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}

static inline void store_be32(unsigned char *p, uint32_t v)
{
    v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}

static inline void store_be64(unsigned char *p, uint64_t v)
{
    v = __builtin_bswap64(v);
    memcpy(p, &v, 8);
}

/* The floats fragment `index` carries: per_fragment, fewer in the last (check_layout has
 * made sure every fragment of the job carries at least one). */
static inline Py_ssize_t carried_floats(Py_ssize_t floats, Py_ssize_t per_fragment,
                                        uint32_t index)
{
    Py_ssize_t rest = floats - (Py_ssize_t)index * per_fragment;
    return rest < per_fragment ? rest : per_fragment;
}

#endif
