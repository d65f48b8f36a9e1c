/* The native data path (syncfabric/hosts/datapath/native.py drives it): datagrams moved
 * in batches (recvmmsg, sendmmsg, UDP GSO and GRO), fragments built and summed in place.
 * Each call releases the GIL while it moves or sums bytes. The wire format and every rule
 * of a summing node are python.py's, which is the reference: see its docstrings. */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define HEADER_BYTES 24          /* job, round, fragment, count (4 bytes each), mask (8) */
#define MAX_MESSAGES 64          /* per recvmmsg / sendmmsg call */
#define GSO_MAX_SEGMENTS 64      /* the kernel's UDP_MAX_SEGMENTS on older kernels */
#define UDP_MAX_PAYLOAD 65507
#define BLOCK_FRAGMENTS 64       /* core_split.BLOCK_FRAGMENTS: no GSO run spans two blocks */
static const char CONTROL_MAGIC[4] = {'S', 'F', 'J', 'C'};

enum status { ADDED = 0, COMPLETED = 1, DROPPED = 2, REPEATED = 3, TO_PYTHON = 4 };

/* --- buffers ----------------------------------------------------------------------- */

/* A writable or read-only buffer of at least `items` elements of `itemsize` bytes. */
static int get_buffer(PyObject *object, Py_buffer *view, int writable, Py_ssize_t itemsize,
                      Py_ssize_t items, const char *name)
{
    if (PyObject_GetBuffer(object, view, writable ? PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS
                                                  : PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->len < itemsize * items) {
        PyErr_Format(PyExc_ValueError, "%s holds %zd bytes, %zd needed", name, view->len,
                     itemsize * items);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The buffers a call holds, released together (release_held). */
typedef struct {
    Py_buffer view[12];
    int count;
} Held;

/* `object`'s buffer (get_buffer's), held as the next of `held`; NULL with an error set. */
static Py_buffer *hold(Held *held, PyObject *object, int writable, Py_ssize_t itemsize,
                       Py_ssize_t items, const char *name)
{
    Py_buffer *view = &held->view[held->count];
    if (get_buffer(object, view, writable, itemsize, items, name) < 0)
        return NULL;
    held->count++;
    return view;
}

static void release_held(Held *held)
{
    while (held->count > 0)
        PyBuffer_Release(&held->view[--held->count]);
}

/* 0 if datagrams first..stop-1 (offsets[i], lengths[i], int64) lie in `buffer`; -1 with
 * an error set if one does not. */
static int datagrams_in(const Py_buffer *buffer, const Py_buffer *offsets,
                        const Py_buffer *lengths, Py_ssize_t first, Py_ssize_t stop)
{
    const int64_t *offset = offsets->buf, *length = lengths->buf;
    for (Py_ssize_t i = first; i < stop; i++)
        if (offset[i] < 0 || length[i] < 0 || offset[i] + length[i] > buffer->len) {
            PyErr_SetString(PyExc_ValueError, "a datagram lies outside the buffer");
            return -1;
        }
    return 0;
}

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

/* The byte-order loops below are built for AVX2 and for any x86-64 (or for the machine
 * alone elsewhere); the loader picks the one this CPU runs (an ifunc). */
#if defined(__x86_64__) && defined(__GNUC__)
#define BYTE_ORDER_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define BYTE_ORDER_LOOP
#endif

/* sums[i] += big-endian float32 payload[i]: the loop gcc vectorises at -O3. */
BYTE_ORDER_LOOP static void add_big_endian(float *restrict sums, const unsigned char *restrict payload, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t bits;
        float value;
        memcpy(&bits, payload + 4 * i, 4);
        bits = __builtin_bswap32(bits);
        memcpy(&value, &bits, 4);
        sums[i] += value;
    }
}

/* out[i] = float32 values[i] in big-endian byte order. */
BYTE_ORDER_LOOP static void copy_big_endian(unsigned char *restrict out, const float *restrict values, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, values + i, 4);
        bits = __builtin_bswap32(bits);
        memcpy(out + 4 * i, &bits, 4);
    }
}

/* values[i] = big-endian float32 payload[i]. */
BYTE_ORDER_LOOP static void load_big_endian(float *restrict values, const unsigned char *restrict payload, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, payload + 4 * i, 4);
        bits = __builtin_bswap32(bits);
        memcpy(values + i, &bits, 4);
    }
}

/* --- receiving ---------------------------------------------------------------------- */

/* recv_batch(fd, buffer, slot_bytes, offsets, lengths, sources, ports) -> (segments, filled)
 * Takes what waits on non-blocking socket fd, up to one datagram (or GRO super-datagram)
 * per slot of `buffer`, without waiting; filled: every slot took one, so more may wait
 * (else the socket was empty: a caller need not ask again until it is readable). A super-datagram is cut back into its segments
 * (UDP_GRO's control message gives their size). Segment i is buffer[offsets[i]:][:lengths[i]]
 * from IPv4 sources[i] (host order) and ports[i]; offsets, lengths (int64), sources (uint32)
 * and ports (uint16) hold 64 entries (the most segments of one datagram) per slot taken.
 * A datagram longer than a slot is dropped. */
static PyObject *recv_batch(PyObject *self, PyObject *args)
{
    int fd;
    Py_ssize_t slot_bytes;
    PyObject *buffer_object, *offsets_object, *lengths_object, *sources_object, *ports_object;
    if (!PyArg_ParseTuple(args, "iOnOOOO", &fd, &buffer_object, &slot_bytes, &offsets_object,
                          &lengths_object, &sources_object, &ports_object))
        return NULL;
    Held held = {.count = 0};
    Py_buffer *buffer, *offsets, *lengths, *sources, *ports;
    if (!(buffer = hold(&held, buffer_object, 1, 1, slot_bytes, "buffer"))
        || !(offsets = hold(&held, offsets_object, 1, 8, GSO_MAX_SEGMENTS, "offsets"))
        || !(lengths = hold(&held, lengths_object, 1, 8, offsets->len / 8, "lengths"))
        || !(sources = hold(&held, sources_object, 1, 4, offsets->len / 8, "sources"))
        || !(ports = hold(&held, ports_object, 1, 2, offsets->len / 8, "ports"))) {
        release_held(&held);
        return NULL;
    }
    Py_ssize_t capacity = offsets->len / 8;
    Py_ssize_t slots = buffer->len / slot_bytes;
    if (slots > MAX_MESSAGES)
        slots = MAX_MESSAGES;
    struct mmsghdr messages[MAX_MESSAGES];
    struct iovec iovecs[MAX_MESSAGES];
    struct sockaddr_in addresses[MAX_MESSAGES];
    char controls[MAX_MESSAGES][CMSG_SPACE(sizeof(int))];
    int64_t *offset = offsets->buf, *length = lengths->buf;
    uint32_t *source = sources->buf;
    uint16_t *port = ports->buf;
    Py_ssize_t segments = 0;
    int error = 0, got = 0;

    /* a GRO super-datagram is cut into at most GSO_MAX_SEGMENTS segments: take no more
     * datagrams than the segment arrays hold if every one were cut so */
    Py_ssize_t batch = capacity / GSO_MAX_SEGMENTS;
    if (batch > slots)
        batch = slots;
    Py_BEGIN_ALLOW_THREADS
    memset(messages, 0, sizeof(struct mmsghdr) * batch);
    for (Py_ssize_t i = 0; i < batch; i++) {
        iovecs[i].iov_base = (char *)buffer->buf + i * slot_bytes;
        iovecs[i].iov_len = slot_bytes;
        messages[i].msg_hdr.msg_iov = &iovecs[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_name = &addresses[i];
        messages[i].msg_hdr.msg_namelen = sizeof(addresses[i]);
        messages[i].msg_hdr.msg_control = controls[i];
        messages[i].msg_hdr.msg_controllen = sizeof(controls[i]);
    }
    got = recvmmsg(fd, messages, (unsigned int)batch, MSG_DONTWAIT, NULL);
    if (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
        error = errno;
    for (int i = 0; i < got; i++) {
        Py_ssize_t size = messages[i].msg_len, segment = size;
        struct cmsghdr *cmsg;
        if (messages[i].msg_hdr.msg_flags & MSG_TRUNC)
            continue;   /* longer than a slot: not one of ours */
        for (cmsg = CMSG_FIRSTHDR(&messages[i].msg_hdr); cmsg;
             cmsg = CMSG_NXTHDR(&messages[i].msg_hdr, cmsg))
            if (cmsg->cmsg_level == SOL_UDP && cmsg->cmsg_type == UDP_GRO) {
                int gso_size;
                memcpy(&gso_size, CMSG_DATA(cmsg), sizeof(int));
                if (gso_size > 0)
                    segment = gso_size;
            }
        Py_ssize_t at = 0;
        do {   /* an empty datagram is one empty segment */
            offset[segments] = i * slot_bytes + at;
            length[segments] = size - at < segment ? size - at : segment;
            source[segments] = ntohl(addresses[i].sin_addr.s_addr);
            port[segments] = ntohs(addresses[i].sin_port);
            segments++;
            at += segment;
        } while (at < size && segments < capacity);
    }
    Py_END_ALLOW_THREADS

    release_held(&held);
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("nO", segments, got == batch ? Py_True : Py_False);
}

/* --- sending ------------------------------------------------------------------------ */

/* Whether datagrams i and j carry fragments of one block (core_split.py); datagrams
 * too short to carry an index count as of one block. */
static inline int same_block(const unsigned char *data, const int64_t *offset,
                             const int64_t *length, Py_ssize_t i, Py_ssize_t j)
{
    if (length[i] < 12 || length[j] < 12)
        return 1;
    return load_be32(data + offset[i] + 8) / BLOCK_FRAGMENTS
        == load_be32(data + offset[j] + 8) / BLOCK_FRAGMENTS;
}

/* send_batch(fd, buffer, offsets, lengths, first, stop, address, port, gso) -> sent
 * Sends datagrams first..stop-1 (buffer[offsets[i]:][:lengths[i]]) to IPv4 address:port
 * (host order), MSG_CONFIRM as the Python path does. With gso, runs of datagrams of one
 * length (the last of a run may be shorter) go as one UDP_SEGMENT send each, up to 64 KB,
 * and never across two blocks of BLOCK_FRAGMENTS fragments (the index at bytes 8..11):
 * a summing node split over cores (core_split.py) takes a whole run on one core.
 * Returns how many left; fewer than asked when the socket's buffer filled (EAGAIN).
 * OSError when the first send fails otherwise (EIO: the device cannot segment). */
static PyObject *send_batch(PyObject *self, PyObject *args)
{
    int fd, gso;
    Py_ssize_t first, stop;
    unsigned int address;
    int destination_port;
    PyObject *buffer_object, *offsets_object, *lengths_object;
    if (!PyArg_ParseTuple(args, "iOOOnnIip", &fd, &buffer_object, &offsets_object,
                          &lengths_object, &first, &stop, &address, &destination_port, &gso))
        return NULL;
    Held held = {.count = 0};
    Py_buffer *buffer, *offsets, *lengths;
    if (!(buffer = hold(&held, buffer_object, 0, 1, 0, "buffer"))
        || !(offsets = hold(&held, offsets_object, 0, 8, stop, "offsets"))
        || !(lengths = hold(&held, lengths_object, 0, 8, stop, "lengths"))
        || datagrams_in(buffer, offsets, lengths, first, stop) < 0) {
        release_held(&held);
        return NULL;
    }
    const int64_t *offset = offsets->buf, *length = lengths->buf;

    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(address);
    to.sin_port = htons((uint16_t)destination_port);
    struct mmsghdr messages[MAX_MESSAGES];
    struct iovec iovecs[MAX_MESSAGES * GSO_MAX_SEGMENTS];
    char controls[MAX_MESSAGES][CMSG_SPACE(sizeof(uint16_t))];
    Py_ssize_t counts[MAX_MESSAGES];
    Py_ssize_t sent = first;
    int error = 0;

    Py_BEGIN_ALLOW_THREADS
    while (sent < stop) {
        int batch = 0, vectors = 0;
        Py_ssize_t next = sent;
        memset(messages, 0, sizeof(messages));
        while (batch < MAX_MESSAGES && next < stop) {
            Py_ssize_t run = 1, bytes = length[next];
            if (gso)   /* same-length datagrams after it; a shorter one may end the run */
                while (next + run < stop && run < GSO_MAX_SEGMENTS
                       && bytes + length[next + run] <= UDP_MAX_PAYLOAD
                       && length[next + run] <= length[next]
                       && length[next + run - 1] == length[next]
                       && same_block(buffer->buf, offset, length, next, next + run)) {
                    bytes += length[next + run];
                    run++;
                }
            struct msghdr *header = &messages[batch].msg_hdr;
            header->msg_name = &to;
            header->msg_namelen = sizeof(to);
            header->msg_iov = &iovecs[vectors];
            header->msg_iovlen = run;
            for (Py_ssize_t k = 0; k < run; k++) {
                iovecs[vectors].iov_base = (char *)buffer->buf + offset[next + k];
                iovecs[vectors].iov_len = length[next + k];
                vectors++;
            }
            if (run > 1) {
                uint16_t segment = (uint16_t)length[next];
                header->msg_control = controls[batch];
                header->msg_controllen = sizeof(controls[batch]);
                struct cmsghdr *cmsg = CMSG_FIRSTHDR(header);
                cmsg->cmsg_level = SOL_UDP;
                cmsg->cmsg_type = UDP_SEGMENT;
                cmsg->cmsg_len = CMSG_LEN(sizeof(uint16_t));
                memcpy(CMSG_DATA(cmsg), &segment, sizeof(segment));
            }
            counts[batch] = run;
            next += run;
            batch++;
        }
        int done = sendmmsg(fd, messages, (unsigned int)batch, MSG_CONFIRM);
        if (done < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK && sent == first)
                error = errno;
            break;
        }
        for (int i = 0; i < done; i++)
            sent += counts[i];
        if (done < batch)
            break;
    }
    Py_END_ALLOW_THREADS

    release_held(&held);
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(sent - first);
}

/* --- fragments ---------------------------------------------------------------------- */

/* build_fragments(buffer, offsets, lengths, job, number, count, indices, masks, values,
 *                 starts, per_fragment, floats) -> datagrams
 * Datagram i carries fragment indices[i] of `count`, for the workers in masks[i]: the
 * header, then values[starts[i]:][:min(per_fragment, floats - starts[i])] as big-endian
 * float32. They lie back to back in `buffer` at offsets[i] (int64, out), lengths[i] long. */
static PyObject *build_fragments(PyObject *self, PyObject *args)
{
    unsigned int job, number, count;
    Py_ssize_t per_fragment, floats;
    PyObject *buffer_object, *offsets_object, *lengths_object, *indices_object, *masks_object,
        *values_object, *starts_object;
    if (!PyArg_ParseTuple(args, "OOOIIIOOOOnn", &buffer_object, &offsets_object,
                          &lengths_object, &job, &number, &count, &indices_object,
                          &masks_object, &values_object, &starts_object, &per_fragment, &floats))
        return NULL;
    Held held = {.count = 0};
    Py_buffer *buffer, *offsets, *lengths, *indices, *masks, *values, *starts;
    PyObject *result = NULL;
    if (!(indices = hold(&held, indices_object, 0, 4, 0, "indices")))
        return NULL;
    Py_ssize_t n = indices->len / 4;
    if (!(masks = hold(&held, masks_object, 0, 8, n, "masks"))
        || !(starts = hold(&held, starts_object, 0, 8, n, "starts"))
        || !(values = hold(&held, values_object, 0, 4, floats, "values"))
        || !(offsets = hold(&held, offsets_object, 1, 8, n, "offsets"))
        || !(lengths = hold(&held, lengths_object, 1, 8, n, "lengths"))
        || !(buffer = hold(&held, buffer_object, 1, HEADER_BYTES + 4 * per_fragment, n, "buffer")))
        goto done;
    const uint32_t *index = indices->buf;
    const uint64_t *mask = masks->buf;
    const int64_t *start = starts->buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (start[i] < 0 || start[i] >= floats) {
            PyErr_Format(PyExc_ValueError, "fragment %u starts at float %lld, outside 0..%zd",
                         index[i], (long long)start[i], floats - 1);
            goto done;
        }
    int64_t *offset = offsets->buf, *length = lengths->buf;
    unsigned char *out = buffer->buf;
    const float *value = values->buf;
    Py_BEGIN_ALLOW_THREADS
    int64_t at = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t carried = floats - start[i] < per_fragment ? floats - start[i] : per_fragment;
        store_be32(out + at, job);
        store_be32(out + at + 4, number);
        store_be32(out + at + 8, index[i]);
        store_be32(out + at + 12, count);
        store_be64(out + at + 16, mask[i]);
        copy_big_endian(out + at + HEADER_BYTES, value + start[i], carried);
        offset[i] = at;
        length[i] = HEADER_BYTES + 4 * carried;
        at += length[i];
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(n);
done:
    release_held(&held);
    return result;
}

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

/* Hold `object`'s rounds: each float32 array of at least `floats`, each have array of
 * `fragments` items of `have_itemsize` bytes. -1 with an error set (release_rounds
 * still releases what was held). */
static int hold_rounds(PyObject *object, Rounds *rounds, Py_ssize_t floats,
                       Py_ssize_t have_itemsize, Py_ssize_t fragments)
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
        PyObject *entry = PySequence_Fast_GET_ITEM(rounds->list, rounds->ready), *values, *have;
        unsigned int number;
        if (!PyArg_ParseTuple(entry, "IOO", &number, &values, &have))
            return -1;
        round->number = number;
        if (get_buffer(values, &round->sums, 1, 4, floats, "a round's floats") < 0)
            return -1;
        if (get_buffer(have, &round->have, 1, have_itemsize, fragments, "have") < 0) {
            PyBuffer_Release(&round->sums);
            return -1;
        }
    }
    return 0;
}

static void release_rounds(Rounds *rounds)
{
    for (Py_ssize_t r = 0; r < rounds->ready; r++) {
        PyBuffer_Release(&rounds->round[r].sums);
        PyBuffer_Release(&rounds->round[r].have);
    }
    PyMem_Free(rounds->round);
    Py_XDECREF(rounds->list);
}

/* Hold a received batch (buffer, offsets, lengths, sources: receive's, n datagrams) in
 * `held` (its first four buffers), and check every datagram lies in the buffer. */
static int hold_batch(Held *held, PyObject *buffer, PyObject *offsets, PyObject *lengths,
                      PyObject *sources, Py_ssize_t n)
{
    Py_buffer *data, *offset, *length;
    if (!(data = hold(held, buffer, 0, 1, 0, "buffer"))
        || !(offset = hold(held, offsets, 0, 8, n, "offsets"))
        || !(length = hold(held, lengths, 0, 8, n, "lengths"))
        || !hold(held, sources, 0, 4, n, "sources"))
        return -1;
    return datagrams_in(data, offset, length, 0, n);
}

/* [each round's `received`]: what a call counted per round. */
static PyObject *received_per_round(Rounds *rounds)
{
    PyObject *list = PyList_New(rounds->count);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t r = 0; r < rounds->count; r++)
        PyList_SET_ITEM(list, r, PyLong_FromLongLong(rounds->round[r].received));
    return list;
}

static Py_ssize_t carried_floats(Py_ssize_t floats, Py_ssize_t per_fragment, uint32_t index)
{
    Py_ssize_t rest = floats - (Py_ssize_t)index * per_fragment;
    return rest < per_fragment ? rest : per_fragment;
}

/* sum_fragments(buffer, offsets, lengths, sources, first, n, job, count, per_fragment,
 *               floats, held_floats, slots, sender_addresses, sender_masks, expected,
 *               rounds, status, completed)
 *   -> (stop, completed pairs, [bytes received per round])
 * A summing node's rule (python.py: PythonDatapath.sum_fragments) for datagrams 0..n-1:
 * a fragment of the job from a sender allowed its workers, for a kept round
 * (rounds: [(number, sums float32 of held_floats, have uint64)]; fragment i's sums at
 * slots[i] * per_fragment, none where slots[i] < 0: gradient_wire.HeldFragments), of
 * exactly its fragment's length, is added unless a worker in it was
 * counted already or is not expected, or it is not a fragment held. status[i] (int8,
 * out) says what became of it: ADDED, COMPLETED (its fragment now holds every expected
 * worker; (round, fragment) appended to `completed`, int64 pairs), DROPPED, REPEATED (its
 * fragment was complete already). It stops at datagram `stop` (n: none) that it leaves to
 * the node, in order: a control message, a fragment it does not sum (another core's:
 * core_split.py), or a round not kept (the node may open it, and forget the oldest). */
static PyObject *sum_fragments(PyObject *self, PyObject *args)
{
    Py_ssize_t first, n, per_fragment, floats, held_floats;
    unsigned int job, count;
    PyObject *buffer_object, *offsets_object, *lengths_object, *sources_object,
        *slots_object, *addresses_object, *masks_object, *expected_object, *rounds_object,
        *status_object, *completed_object;
    if (!PyArg_ParseTuple(args, "OOOOnnIInnnOOOOOOO", &buffer_object, &offsets_object,
                          &lengths_object, &sources_object, &first, &n, &job, &count, &per_fragment,
                          &floats, &held_floats, &slots_object, &addresses_object, &masks_object,
                          &expected_object,
                          &rounds_object, &status_object, &completed_object))
        return NULL;
    if (held_floats < 0 || per_fragment < 1) {
        PyErr_SetString(PyExc_ValueError, "no array holds a negative number of floats");
        return NULL;
    }
    Rounds rounds;
    Held held = {.count = 0};
    Py_buffer *slot_view, *addresses, *masks, *expecteds, *statuses, *completions;
    PyObject *result = NULL;
    if (hold_rounds(rounds_object, &rounds, held_floats, 8, count) < 0
        || hold_batch(&held, buffer_object, offsets_object, lengths_object, sources_object, n) < 0
        || !(slot_view = hold(&held, slots_object, 0, 8, count, "slots"))
        || !(addresses = hold(&held, addresses_object, 0, 4, 0, "sender addresses"))
        || !(masks = hold(&held, masks_object, 0, 8, addresses->len / 4, "sender masks"))
        || !(expecteds = hold(&held, expected_object, 0, 8, count, "expected"))
        || !(statuses = hold(&held, status_object, 1, 1, n, "status"))
        || !(completions = hold(&held, completed_object, 1, 16, n, "completed")))
        goto done;

    const unsigned char *data = held.view[0].buf;
    const int64_t *offset = held.view[1].buf, *length = held.view[2].buf;
    const uint32_t *source = held.view[3].buf, *sender_address = addresses->buf;
    const uint64_t *sender_mask = masks->buf, *expected = expecteds->buf;
    const int64_t *slot = slot_view->buf;
    const Py_ssize_t slots_held = held_floats / per_fragment;
    Py_ssize_t senders = addresses->len / 4;
    int8_t *status = statuses->buf;
    int64_t *completed = completions->buf;
    Py_ssize_t complete_count = 0, stop = n;
    if (first < 0 || first > n) {
        PyErr_SetString(PyExc_ValueError, "first lies outside the batch");
        goto done;
    }

    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = first; i < n; i++) {
        const unsigned char *packet = data + offset[i];
        Py_ssize_t size = length[i];
        if (size >= 4 && memcmp(packet, CONTROL_MAGIC, 4) == 0) {
            status[i] = TO_PYTHON;
            stop = i;
            break;
        }
        if (size < HEADER_BYTES) {
            status[i] = DROPPED;
            continue;
        }
        uint32_t packet_job = load_be32(packet), number = load_be32(packet + 4);
        uint32_t index = load_be32(packet + 8), packet_count = load_be32(packet + 12);
        uint64_t mask = load_be64(packet + 16), allowed = 0;
        for (Py_ssize_t s = 0; s < senders; s++)
            if (sender_address[s] == source[i])
                allowed = sender_mask[s];
        if (packet_job != job || packet_count != count || index >= count || !mask
            || (mask & ~allowed)) {
            status[i] = DROPPED;
            continue;
        }
        if (expected[index] == 0) {   /* not summed here: another core's, or no node's */
            status[i] = TO_PYTHON;
            stop = i;
            break;
        }
        KeptRound *round = NULL;
        for (Py_ssize_t r = 0; r < rounds.count; r++)
            if (rounds.round[r].number == number)
                round = &rounds.round[r];
        if (round == NULL) {
            status[i] = TO_PYTHON;   /* a round to open, or one too old: the node decides */
            stop = i;
            break;
        }
        Py_ssize_t carried = carried_floats(floats, per_fragment, index);
        if (size - HEADER_BYTES != 4 * carried) {
            status[i] = DROPPED;
            continue;
        }
        uint64_t *have = round->have.buf;
        if (have[index] == expected[index]) {
            status[i] = REPEATED;
            continue;
        }
        round->received += size + 42;   /* FRAME_OVERHEAD: Ethernet, IP, UDP */
        if ((mask & have[index]) || (mask & ~expected[index]) || slot[index] < 0
            || slot[index] >= slots_held) {
            status[i] = ADDED;   /* counted already, or not ours: no change, as in Python */
            continue;
        }
        float *sums = (float *)round->sums.buf + (Py_ssize_t)slot[index] * per_fragment;
        if (have[index])
            add_big_endian(sums, packet + HEADER_BYTES, carried);
        else   /* the first is copied: the array may hold an older round's sums */
            load_big_endian(sums, packet + HEADER_BYTES, carried);
        have[index] |= mask;
        if (have[index] == expected[index]) {
            status[i] = COMPLETED;
            completed[2 * complete_count] = number;
            completed[2 * complete_count + 1] = index;
            complete_count++;
        } else {
            status[i] = ADDED;
        }
    }
    Py_END_ALLOW_THREADS

    PyObject *received = received_per_round(&rounds);
    if (received == NULL)
        goto done;
    result = Py_BuildValue("nnN", stop, complete_count, received);
done:
    release_held(&held);
    release_rounds(&rounds);
    return result;
}

/* place_sums(buffer, offsets, lengths, sources, n, shard_address, job, everyone, first,
 *            last, count, per_fragment, floats, block_of, rounds) -> [placed per round]
 * A worker taking its shard's sums back (python.py: PythonDatapath.place_sums): a
 * datagram from the shard's host, of the job, carrying every worker, of a fragment in
 * the shard's range and of its exact length, for an open round (rounds: [(number, result
 * float32, have bool)]) is copied to the fragment's block (block_of, int64) unless the
 * round has it already. */
static PyObject *place_sums(PyObject *self, PyObject *args)
{
    Py_ssize_t n, per_fragment, floats;
    unsigned int shard_address, job, first, last, count;
    unsigned long long everyone;
    PyObject *buffer_object, *offsets_object, *lengths_object, *sources_object,
        *block_of_object, *rounds_object;
    if (!PyArg_ParseTuple(args, "OOOOnIIKIIInnOO", &buffer_object, &offsets_object,
                          &lengths_object, &sources_object, &n, &shard_address, &job, &everyone,
                          &first, &last, &count, &per_fragment, &floats, &block_of_object,
                          &rounds_object))
        return NULL;
    Rounds rounds;
    Held held = {.count = 0};
    Py_buffer *blocks;
    PyObject *result = NULL;
    if (hold_rounds(rounds_object, &rounds, count * per_fragment, 1, count) < 0
        || hold_batch(&held, buffer_object, offsets_object, lengths_object, sources_object, n) < 0
        || !(blocks = hold(&held, block_of_object, 0, 8, count, "block_of")))
        goto done;
    const unsigned char *data = held.view[0].buf;
    const int64_t *offset = held.view[1].buf, *length = held.view[2].buf, *block_of = blocks->buf;
    const uint32_t *source = held.view[3].buf;
    for (Py_ssize_t b = 0; b < count; b++)
        if (block_of[b] < 0 || block_of[b] >= count) {
            PyErr_SetString(PyExc_ValueError, "block_of names a block outside the job");
            goto done;
        }

    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        const unsigned char *packet = data + offset[i];
        if (source[i] != shard_address || length[i] < HEADER_BYTES)
            continue;
        uint32_t number = load_be32(packet + 4), index = load_be32(packet + 8);
        if (load_be32(packet) != job || load_be64(packet + 16) != everyone
            || index < first || index >= last || index >= count)
            continue;
        if (length[i] - HEADER_BYTES != 4 * carried_floats(floats, per_fragment, index))
            continue;
        for (Py_ssize_t r = 0; r < rounds.count; r++) {
            KeptRound *round = &rounds.round[r];
            uint8_t *have = round->have.buf;
            if (round->number != number || have[index])
                continue;
            load_big_endian((float *)round->sums.buf + block_of[index] * per_fragment,
                            packet + HEADER_BYTES, (length[i] - HEADER_BYTES) / 4);
            have[index] = 1;
            round->received++;
        }
    }
    Py_END_ALLOW_THREADS

    result = received_per_round(&rounds);
done:
    release_held(&held);
    release_rounds(&rounds);
    return result;
}

static PyMethodDef methods[] = {
    {"recv_batch", recv_batch, METH_VARARGS, "Take a batch of datagrams (recvmmsg, GRO)."},
    {"send_batch", send_batch, METH_VARARGS, "Send a batch of datagrams (sendmmsg, GSO)."},
    {"build_fragments", build_fragments, METH_VARARGS, "Build fragment datagrams."},
    {"sum_fragments", sum_fragments, METH_VARARGS, "A summing node's batch of fragments."},
    {"place_sums", place_sums, METH_VARARGS, "A worker's batch of returned sums."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                                    "syncfabric's native data path (datapath/native.py).", -1,
                                    methods};

PyMODINIT_FUNC PyInit__native(void)
{
    return PyModule_Create(&module);
}
