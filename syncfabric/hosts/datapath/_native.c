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

/* recv_batch(fd, buffer, slot_bytes, offsets, lengths, sources, ports) -> segments
 * Takes what waits on non-blocking socket fd, up to one datagram (or GRO super-datagram)
 * per slot of `buffer`, without waiting. A super-datagram is cut back into its segments
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
    Py_buffer buffer, offsets, lengths, sources, ports;
    if (get_buffer(buffer_object, &buffer, 1, 1, slot_bytes, "buffer") < 0)
        return NULL;
    if (get_buffer(offsets_object, &offsets, 1, 8, 1, "offsets") < 0)
        goto release_buffer;
    Py_ssize_t capacity = offsets.len / 8;
    if (get_buffer(lengths_object, &lengths, 1, 8, capacity, "lengths") < 0)
        goto release_offsets;
    if (get_buffer(sources_object, &sources, 1, 4, capacity, "sources") < 0)
        goto release_lengths;
    if (get_buffer(ports_object, &ports, 1, 2, capacity, "ports") < 0)
        goto release_sources;

    Py_ssize_t slots = buffer.len / slot_bytes;
    if (slots > MAX_MESSAGES)
        slots = MAX_MESSAGES;
    struct mmsghdr messages[MAX_MESSAGES];
    struct iovec iovecs[MAX_MESSAGES];
    struct sockaddr_in addresses[MAX_MESSAGES];
    char controls[MAX_MESSAGES][CMSG_SPACE(sizeof(int))];
    int64_t *offset = offsets.buf, *length = lengths.buf;
    uint32_t *source = sources.buf;
    uint16_t *port = ports.buf;
    Py_ssize_t segments = 0;
    int error = 0;

    /* a GRO super-datagram is cut into at most GSO_MAX_SEGMENTS segments: take no more
     * datagrams than the segment arrays hold if every one were cut so */
    Py_ssize_t batch = capacity / GSO_MAX_SEGMENTS;
    if (batch > slots)
        batch = slots;
    if (batch < 1) {
        PyErr_SetString(PyExc_ValueError, "the segment arrays hold fewer than 64 entries");
        goto release_ports;
    }
    Py_BEGIN_ALLOW_THREADS
    memset(messages, 0, sizeof(struct mmsghdr) * batch);
    for (Py_ssize_t i = 0; i < batch; i++) {
        iovecs[i].iov_base = (char *)buffer.buf + i * slot_bytes;
        iovecs[i].iov_len = slot_bytes;
        messages[i].msg_hdr.msg_iov = &iovecs[i];
        messages[i].msg_hdr.msg_iovlen = 1;
        messages[i].msg_hdr.msg_name = &addresses[i];
        messages[i].msg_hdr.msg_namelen = sizeof(addresses[i]);
        messages[i].msg_hdr.msg_control = controls[i];
        messages[i].msg_hdr.msg_controllen = sizeof(controls[i]);
    }
    int got = recvmmsg(fd, messages, (unsigned int)batch, MSG_DONTWAIT, NULL);
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
        if (segment == 0) {   /* an empty datagram: one empty segment */
            offset[segments] = i * slot_bytes;
            length[segments] = 0;
            source[segments] = ntohl(addresses[i].sin_addr.s_addr);
            port[segments] = ntohs(addresses[i].sin_port);
            segments++;
            continue;
        }
        for (Py_ssize_t at = 0; at < size && segments < capacity; at += segment) {
            offset[segments] = i * slot_bytes + at;
            length[segments] = size - at < segment ? size - at : segment;
            source[segments] = ntohl(addresses[i].sin_addr.s_addr);
            port[segments] = ntohs(addresses[i].sin_port);
            segments++;
        }
    }
    Py_END_ALLOW_THREADS

    PyBuffer_Release(&ports);
    PyBuffer_Release(&sources);
    PyBuffer_Release(&lengths);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&buffer);
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(segments);

release_ports:
    PyBuffer_Release(&ports);
release_sources:
    PyBuffer_Release(&sources);
release_lengths:
    PyBuffer_Release(&lengths);
release_offsets:
    PyBuffer_Release(&offsets);
release_buffer:
    PyBuffer_Release(&buffer);
    return NULL;
}

/* --- sending ------------------------------------------------------------------------ */

/* send_batch(fd, buffer, offsets, lengths, first, stop, address, port, gso) -> sent
 * Sends datagrams first..stop-1 (buffer[offsets[i]:][:lengths[i]]) to IPv4 address:port
 * (host order), MSG_CONFIRM as the Python path does. With gso, runs of datagrams of one
 * length (the last of a run may be shorter) go as one UDP_SEGMENT send each, up to 64 KB.
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
    Py_buffer buffer, offsets, lengths;
    if (get_buffer(buffer_object, &buffer, 0, 1, 0, "buffer") < 0)
        return NULL;
    if (get_buffer(offsets_object, &offsets, 0, 8, stop, "offsets") < 0) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    if (get_buffer(lengths_object, &lengths, 0, 8, stop, "lengths") < 0) {
        PyBuffer_Release(&offsets);
        PyBuffer_Release(&buffer);
        return NULL;
    }
    const int64_t *offset = offsets.buf, *length = lengths.buf;
    for (Py_ssize_t i = first; i < stop; i++)
        if (offset[i] < 0 || length[i] < 0 || offset[i] + length[i] > buffer.len) {
            PyBuffer_Release(&lengths);
            PyBuffer_Release(&offsets);
            PyBuffer_Release(&buffer);
            PyErr_SetString(PyExc_ValueError, "a datagram lies outside the buffer");
            return NULL;
        }

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
                       && length[next + run - 1] == length[next]) {
                    bytes += length[next + run];
                    run++;
                }
            struct msghdr *header = &messages[batch].msg_hdr;
            header->msg_name = &to;
            header->msg_namelen = sizeof(to);
            header->msg_iov = &iovecs[vectors];
            header->msg_iovlen = run;
            for (Py_ssize_t k = 0; k < run; k++) {
                iovecs[vectors].iov_base = (char *)buffer.buf + offset[next + k];
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

    PyBuffer_Release(&lengths);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&buffer);
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
    Py_buffer buffer, offsets, lengths, indices, masks, values, starts;
    if (get_buffer(indices_object, &indices, 0, 4, 0, "indices") < 0)
        return NULL;
    Py_ssize_t n = indices.len / 4;
    PyObject *result = NULL;
    if (get_buffer(masks_object, &masks, 0, 8, n, "masks") < 0)
        goto release_indices;
    if (get_buffer(starts_object, &starts, 0, 8, n, "starts") < 0)
        goto release_masks;
    if (get_buffer(values_object, &values, 0, 4, floats, "values") < 0)
        goto release_starts;
    if (get_buffer(offsets_object, &offsets, 1, 8, n, "offsets") < 0)
        goto release_values;
    if (get_buffer(lengths_object, &lengths, 1, 8, n, "lengths") < 0)
        goto release_offsets;
    if (get_buffer(buffer_object, &buffer, 1, HEADER_BYTES + 4 * per_fragment, n, "buffer") < 0)
        goto release_lengths;
    const uint32_t *index = indices.buf;
    const uint64_t *mask = masks.buf;
    const int64_t *start = starts.buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (start[i] < 0 || start[i] >= floats) {
            PyErr_Format(PyExc_ValueError, "fragment %u starts at float %lld, outside 0..%zd",
                         index[i], (long long)start[i], floats - 1);
            goto release_all;
        }
    int64_t *offset = offsets.buf, *length = lengths.buf;
    unsigned char *out = buffer.buf;
    const float *value = values.buf;
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
release_all:
    PyBuffer_Release(&buffer);
release_lengths:
    PyBuffer_Release(&lengths);
release_offsets:
    PyBuffer_Release(&offsets);
release_values:
    PyBuffer_Release(&values);
release_starts:
    PyBuffer_Release(&starts);
release_masks:
    PyBuffer_Release(&masks);
release_indices:
    PyBuffer_Release(&indices);
    return result;
}

/* One kept round of a summing node: its number, float32 sums and uint64 masks held. */
typedef struct {
    uint32_t number;
    Py_buffer sums, have;
    int64_t received;
} KeptRound;

static Py_ssize_t carried_floats(Py_ssize_t floats, Py_ssize_t per_fragment, uint32_t index)
{
    Py_ssize_t rest = floats - (Py_ssize_t)index * per_fragment;
    return rest < per_fragment ? rest : per_fragment;
}

/* sum_fragments(buffer, offsets, lengths, sources, first, n, job, count, per_fragment,
 *               floats, held_first, held_last, sender_addresses, sender_masks, expected,
 *               rounds, status, completed)
 *   -> (stop, completed pairs, [bytes received per round])
 * A summing node's rule (python.py: PythonDatapath.sum_fragments) for datagrams 0..n-1:
 * a fragment of the job from a sender allowed its workers, for a kept round
 * (rounds: [(number, sums float32, have uint64)]; sums holds fragments held_first..
 * held_last-1), of exactly its fragment's length, is added unless a worker in it was
 * counted already or is not expected, or it is not a fragment held. status[i] (int8,
 * out) says what became of it: ADDED, COMPLETED (its fragment now holds every expected
 * worker; (round, fragment) appended to `completed`, int64 pairs), DROPPED, REPEATED (its
 * fragment was complete already). It stops at datagram `stop` (n: none) that it leaves to
 * the node, in order: a control message, or a round not kept (the node may open it, and
 * forget the oldest). */
static PyObject *sum_fragments(PyObject *self, PyObject *args)
{
    Py_ssize_t first, n, per_fragment, floats, held_first, held_last;
    unsigned int job, count;
    PyObject *buffer_object, *offsets_object, *lengths_object, *sources_object,
        *addresses_object, *masks_object, *expected_object, *rounds_object, *status_object,
        *completed_object;
    if (!PyArg_ParseTuple(args, "OOOOnnIInnnnOOOOOO", &buffer_object, &offsets_object,
                          &lengths_object, &sources_object, &first, &n, &job, &count, &per_fragment,
                          &floats, &held_first, &held_last, &addresses_object, &masks_object,
                          &expected_object,
                          &rounds_object, &status_object, &completed_object))
        return NULL;
    if (held_first < 0 || held_last < held_first || held_last > count) {
        PyErr_SetString(PyExc_ValueError, "the fragments held lie outside the job's");
        return NULL;
    }
    PyObject *rounds_list = PySequence_Fast(rounds_object, "rounds must be a sequence");
    if (rounds_list == NULL)
        return NULL;
    Py_ssize_t kept = PySequence_Fast_GET_SIZE(rounds_list);
    KeptRound *round_of = PyMem_Calloc(kept ? kept : 1, sizeof(KeptRound));
    Py_buffer views[9];
    int held = 0;
    PyObject *result = NULL;
    Py_ssize_t ready_rounds = 0;
    if (round_of == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; ready_rounds < kept; ready_rounds++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(rounds_list, ready_rounds), *sums, *have;
        unsigned int number;
        if (!PyArg_ParseTuple(entry, "IOO", &number, &sums, &have))
            goto done;
        round_of[ready_rounds].number = number;
        if (get_buffer(sums, &round_of[ready_rounds].sums, 1, 4,
                       (held_last - held_first) * per_fragment, "sums") < 0)
            goto done;
        if (get_buffer(have, &round_of[ready_rounds].have, 1, 8, count, "have") < 0) {
            PyBuffer_Release(&round_of[ready_rounds].sums);
            goto done;
        }
    }
    if (get_buffer(buffer_object, &views[held], 0, 1, 0, "buffer") < 0) goto done;
    held++;
    if (get_buffer(offsets_object, &views[held], 0, 8, n, "offsets") < 0) goto done;
    held++;
    if (get_buffer(lengths_object, &views[held], 0, 8, n, "lengths") < 0) goto done;
    held++;
    if (get_buffer(sources_object, &views[held], 0, 4, n, "sources") < 0) goto done;
    held++;
    if (get_buffer(addresses_object, &views[held], 0, 4, 0, "sender addresses") < 0) goto done;
    held++;
    Py_ssize_t senders = views[4].len / 4;
    if (get_buffer(masks_object, &views[held], 0, 8, senders, "sender masks") < 0) goto done;
    held++;
    if (get_buffer(expected_object, &views[held], 0, 8, count, "expected") < 0) goto done;
    held++;
    if (get_buffer(status_object, &views[held], 1, 1, n, "status") < 0) goto done;
    held++;
    if (get_buffer(completed_object, &views[held], 1, 16, n, "completed") < 0) goto done;
    held++;

    const unsigned char *data = views[0].buf;
    const int64_t *offset = views[1].buf, *length = views[2].buf;
    const uint32_t *source = views[3].buf, *sender_address = views[4].buf;
    const uint64_t *sender_mask = views[5].buf, *expected = views[6].buf;
    int8_t *status = views[7].buf;
    int64_t *completed = views[8].buf;
    Py_ssize_t complete_count = 0, stop = n;
    if (first < 0 || first > n) {
        PyErr_SetString(PyExc_ValueError, "first lies outside the batch");
        goto done;
    }
    for (Py_ssize_t i = first; i < n; i++)
        if (offset[i] < 0 || length[i] < 0 || offset[i] + length[i] > views[0].len) {
            PyErr_SetString(PyExc_ValueError, "a datagram lies outside the buffer");
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
        KeptRound *round = NULL;
        for (Py_ssize_t r = 0; r < kept; r++)
            if (round_of[r].number == number)
                round = &round_of[r];
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
        if ((mask & have[index]) || (mask & ~expected[index]) || index < held_first
            || index >= held_last) {
            status[i] = ADDED;   /* counted already, or not ours: no change, as in Python */
            continue;
        }
        float *sums = (float *)round->sums.buf + (Py_ssize_t)(index - held_first) * per_fragment;
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

    PyObject *received = PyList_New(kept);
    if (received == NULL)
        goto done;
    for (Py_ssize_t r = 0; r < kept; r++)
        PyList_SET_ITEM(received, r, PyLong_FromLongLong(round_of[r].received));
    result = Py_BuildValue("nnN", stop, complete_count, received);
done:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    for (Py_ssize_t r = 0; r < ready_rounds; r++) {
        PyBuffer_Release(&round_of[r].sums);
        PyBuffer_Release(&round_of[r].have);
    }
    PyMem_Free(round_of);
    Py_DECREF(rounds_list);
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
    PyObject *rounds_list = PySequence_Fast(rounds_object, "rounds must be a sequence");
    if (rounds_list == NULL)
        return NULL;
    Py_ssize_t kept = PySequence_Fast_GET_SIZE(rounds_list);
    KeptRound *round_of = PyMem_Calloc(kept ? kept : 1, sizeof(KeptRound));
    Py_buffer views[5];
    int held = 0;
    PyObject *result = NULL;
    Py_ssize_t ready_rounds = 0;
    if (round_of == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; ready_rounds < kept; ready_rounds++) {
        PyObject *entry = PySequence_Fast_GET_ITEM(rounds_list, ready_rounds), *sums, *have;
        unsigned int number;
        if (!PyArg_ParseTuple(entry, "IOO", &number, &sums, &have))
            goto done;
        round_of[ready_rounds].number = number;
        if (get_buffer(sums, &round_of[ready_rounds].sums, 1, 4, count * per_fragment, "result") < 0)
            goto done;
        if (get_buffer(have, &round_of[ready_rounds].have, 1, 1, count, "have") < 0) {
            PyBuffer_Release(&round_of[ready_rounds].sums);
            goto done;
        }
    }
    if (get_buffer(buffer_object, &views[held], 0, 1, 0, "buffer") < 0) goto done;
    held++;
    if (get_buffer(offsets_object, &views[held], 0, 8, n, "offsets") < 0) goto done;
    held++;
    if (get_buffer(lengths_object, &views[held], 0, 8, n, "lengths") < 0) goto done;
    held++;
    if (get_buffer(sources_object, &views[held], 0, 4, n, "sources") < 0) goto done;
    held++;
    if (get_buffer(block_of_object, &views[held], 0, 8, count, "block_of") < 0) goto done;
    held++;
    const unsigned char *data = views[0].buf;
    const int64_t *offset = views[1].buf, *length = views[2].buf, *block_of = views[4].buf;
    const uint32_t *source = views[3].buf;
    for (Py_ssize_t i = 0; i < n; i++)
        if (offset[i] < 0 || length[i] < 0 || offset[i] + length[i] > views[0].len) {
            PyErr_SetString(PyExc_ValueError, "a datagram lies outside the buffer");
            goto done;
        }
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
        for (Py_ssize_t r = 0; r < kept; r++) {
            uint8_t *have = round_of[r].have.buf;
            if (round_of[r].number != number || have[index])
                continue;
            load_big_endian((float *)round_of[r].sums.buf + block_of[index] * per_fragment,
                            packet + HEADER_BYTES, (length[i] - HEADER_BYTES) / 4);
            have[index] = 1;
            round_of[r].received++;
        }
    }
    Py_END_ALLOW_THREADS

    result = PyList_New(kept);
    if (result == NULL)
        goto done;
    for (Py_ssize_t r = 0; r < kept; r++)
        PyList_SET_ITEM(result, r, PyLong_FromLongLong(round_of[r].received));
done:
    while (held > 0)
        PyBuffer_Release(&views[--held]);
    for (Py_ssize_t r = 0; r < ready_rounds; r++) {
        PyBuffer_Release(&round_of[r].sums);
        PyBuffer_Release(&round_of[r].have);
    }
    PyMem_Free(round_of);
    Py_DECREF(rounds_list);
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
