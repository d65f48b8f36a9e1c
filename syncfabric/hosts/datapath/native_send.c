/* Sending: fragments' headers built, and datagrams sent in batches (sendmmsg), runs of
 * equal datagrams as one UDP GSO send. A fragment's floats are not copied to be sent:
 * its datagram is its header and a piece of the caller's float32 array, which the
 * kernel copies as it sends (the wire's floats are in this host's order: native.h). The
 * caller's ranges, sizes and layout are checked before a byte is written or sent. */

#include "native.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

/* Datagrams to send: datagram i is head[offset[i]:][:length[i]], then, where there is a
 * payload, payload[payload_offset[i]:][:payload_length[i]]. */
typedef struct {
    const unsigned char *head, *payload;
    const int64_t *offset, *length, *payload_offset, *payload_length;
} Datagrams;

static inline int64_t datagram_bytes(const Datagrams *d, Py_ssize_t i)
{
    return d->length[i] + (d->payload ? d->payload_length[i] : 0);
}

/* Whether datagrams i and j carry fragments of one block (core_split.py); datagrams
 * whose head is too short to carry an index count as of one block. */
static inline int same_block(const Datagrams *d, Py_ssize_t i, Py_ssize_t j)
{
    if (d->length[i] < 12 || d->length[j] < 12)
        return 1;
    return load_be32(d->head + d->offset[i] + 8) / BLOCK_FRAGMENTS
        == load_be32(d->head + d->offset[j] + 8) / BLOCK_FRAGMENTS;
}

/* Hold send_batch's datagrams first..stop-1 in `held` and describe them in `d`: every
 * piece inside its buffer, and no datagram longer than UDP carries; -1 with an error set
 * otherwise. A payload (not None) comes with its offsets and lengths. */
static int hold_datagrams(Held *held, Datagrams *d, PyObject *head_object,
                          PyObject *offsets_object, PyObject *lengths_object,
                          PyObject *payload_object, PyObject *payload_offsets_object,
                          PyObject *payload_lengths_object, Py_ssize_t first, Py_ssize_t stop)
{
    Py_buffer *head, *offsets, *lengths, *payload, *payload_offsets, *payload_lengths;
    if (!(head = hold(held, head_object, 0, BYTES, 0, "buffer"))
        || !(offsets = hold(held, offsets_object, 0, INT64, stop, "offsets"))
        || !(lengths = hold(held, lengths_object, 0, INT64, stop, "lengths"))
        || datagrams_in(head, offsets, lengths, first, stop, UDP_MAX_PAYLOAD) < 0)
        return -1;
    *d = (Datagrams){.head = head->buf, .offset = offsets->buf, .length = lengths->buf};
    if (payload_object == Py_None)
        return 0;
    if (!(payload = hold(held, payload_object, 0, FLOAT32, 0, "payload"))
        || !(payload_offsets = hold(held, payload_offsets_object, 0, INT64, stop,
                                    "payload offsets"))
        || !(payload_lengths = hold(held, payload_lengths_object, 0, INT64, stop,
                                    "payload lengths"))
        || datagrams_in(payload, payload_offsets, payload_lengths, first, stop,
                        UDP_MAX_PAYLOAD) < 0)
        return -1;
    d->payload = payload->buf;
    d->payload_offset = payload_offsets->buf;
    d->payload_length = payload_lengths->buf;
    for (Py_ssize_t i = first; i < stop; i++)
        if (datagram_bytes(d, i) > UDP_MAX_PAYLOAD) {
            PyErr_Format(PyExc_ValueError, "datagram %zd of %lld bytes: UDP carries %d at most",
                         i, (long long)datagram_bytes(d, i), UDP_MAX_PAYLOAD);
            return -1;
        }
    return 0;
}

/* send_batch(fd, buffer, offsets, lengths, payload, payload_offsets, payload_lengths,
 *            first, stop, address, port, gso) -> sent
 * Sends datagrams first..stop-1 (buffer[offsets[i]:][:lengths[i]], then, unless payload
 * is None, payload[payload_offsets[i]:][:payload_lengths[i]] in bytes of the float32
 * array `payload`) to IPv4 address:port (host order), MSG_CONFIRM as the Python path
 * does. With gso, runs of datagrams of one
 * length (the last of a run may be shorter) go as one UDP_SEGMENT send each, up to 64 KB,
 * and never across two blocks of BLOCK_FRAGMENTS fragments (the index at bytes 8..11):
 * a summing node split over cores (core_split.py) takes a whole run on one core.
 * Returns how many left; fewer than asked when the socket's buffer filled (EAGAIN).
 * OSError when the first send fails otherwise (EIO: the device cannot segment). */
PyObject *send_batch(PyObject *Py_UNUSED(self), PyObject *args)
{
    int fd, gso;
    Py_ssize_t first, stop;
    uint32_t address;
    int destination_port;
    PyObject *buffer_object, *offsets_object, *lengths_object, *payload_object,
        *payload_offsets_object, *payload_lengths_object;
    if (!PyArg_ParseTuple(args, "iOOOOOOnnO&ip", &fd, &buffer_object, &offsets_object,
                          &lengths_object, &payload_object, &payload_offsets_object,
                          &payload_lengths_object, &first, &stop, uint32_arg, &address,
                          &destination_port, &gso))
        return NULL;
    if (first < 0 || stop < first || destination_port < 0 || destination_port > 65535) {
        PyErr_Format(PyExc_ValueError, "datagrams %zd..%zd to port %d: give 0 <= first <= stop "
                     "and a port in 0..65535", first, stop, destination_port);
        return NULL;
    }
    Held held = {.count = 0};
    Datagrams d;
    if (hold_datagrams(&held, &d, buffer_object, offsets_object, lengths_object,
                       payload_object, payload_offsets_object, payload_lengths_object, first,
                       stop) < 0) {
        release_held(&held);
        return NULL;
    }

    struct sockaddr_in to;
    memset(&to, 0, sizeof(to));
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = htonl(address);
    to.sin_port = htons((uint16_t)destination_port);
    struct mmsghdr messages[MAX_MESSAGES];
    struct iovec iovecs[MAX_MESSAGES * GSO_SEND_SEGMENTS * 2];   /* a head and a payload each */
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
            Py_ssize_t run = 1;
            int64_t size = datagram_bytes(&d, next), bytes = size;
            if (gso)   /* same-length datagrams after it; a shorter one may end the run */
                while (next + run < stop && run < GSO_SEND_SEGMENTS
                       && bytes + datagram_bytes(&d, next + run) <= UDP_MAX_PAYLOAD
                       && datagram_bytes(&d, next + run) <= size
                       && datagram_bytes(&d, next + run - 1) == size
                       && same_block(&d, next, next + run)) {
                    bytes += datagram_bytes(&d, next + run);
                    run++;
                }
            struct msghdr *header = &messages[batch].msg_hdr;
            header->msg_name = &to;
            header->msg_namelen = sizeof(to);
            header->msg_iov = &iovecs[vectors];
            for (Py_ssize_t k = next; k < next + run; k++) {
                iovecs[vectors].iov_base = (char *)d.head + d.offset[k];
                iovecs[vectors].iov_len = d.length[k];
                vectors++;
                if (d.payload) {
                    iovecs[vectors].iov_base = (char *)d.payload + d.payload_offset[k];
                    iovecs[vectors].iov_len = d.payload_length[k];
                    vectors++;
                }
            }
            header->msg_iovlen = &iovecs[vectors] - header->msg_iov;
            if (run > 1) {
                uint16_t segment = (uint16_t)size;
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

/* build_fragments(buffer, offsets, lengths, payload_offsets, payload_lengths, job, number,
 *                 count, indices, masks, values, starts, per_fragment, floats) -> datagrams
 * Datagram i carries fragment indices[i] of `count`, for the workers in masks[i]: its
 * header, built in `buffer` at offsets[i] (int64, out; lengths[i] = the header's bytes),
 * then values[starts[i]:][:min(per_fragment, floats - starts[i])] where they lie, bytes
 * payload_offsets[i] (out) to payload_offsets[i] + payload_lengths[i] (out) of `values`
 * (send_batch's payload). */
PyObject *build_fragments(PyObject *Py_UNUSED(self), PyObject *args)
{
    uint32_t job, number, count;
    Py_ssize_t per_fragment, floats, datagram_bytes;
    PyObject *buffer_object, *offsets_object, *lengths_object, *payload_offsets_object,
        *payload_lengths_object, *indices_object, *masks_object, *values_object, *starts_object;
    if (!PyArg_ParseTuple(args, "OOOOOO&O&O&OOOOnn", &buffer_object, &offsets_object,
                          &lengths_object, &payload_offsets_object, &payload_lengths_object,
                          uint32_arg, &job, uint32_arg, &number, uint32_arg, &count,
                          &indices_object, &masks_object, &values_object, &starts_object,
                          &per_fragment, &floats))
        return NULL;
    if (per_fragment < 1 || floats < 0
        || __builtin_mul_overflow(per_fragment, 4, &datagram_bytes)
        || __builtin_add_overflow(datagram_bytes, HEADER_BYTES, &datagram_bytes)
        || datagram_bytes > UDP_MAX_PAYLOAD) {
        PyErr_Format(PyExc_ValueError, "fragments of %zd floats (of %zd): give at least one "
                     "float a fragment, and no more than a datagram holds", per_fragment, floats);
        return NULL;
    }
    Held held = {.count = 0};
    Py_buffer *buffer, *offsets, *lengths, *payload_offsets, *payload_lengths, *indices,
        *masks, *starts;
    PyObject *result = NULL;
    Py_ssize_t n, buffer_bytes;
    if (!(indices = hold(&held, indices_object, 0, UINT32, 0, "indices")))
        return NULL;
    n = indices->len / 4;
    if (__builtin_mul_overflow(n, (Py_ssize_t)HEADER_BYTES, &buffer_bytes)) {
        PyErr_Format(PyExc_ValueError, "%zd headers overflow", n);
        goto done;
    }
    if (!(masks = hold(&held, masks_object, 0, UINT64, n, "masks"))
        || !(starts = hold(&held, starts_object, 0, INT64, n, "starts"))
        || !hold(&held, values_object, 0, FLOAT32, floats, "values")
        || !(offsets = hold(&held, offsets_object, 1, INT64, n, "offsets"))
        || !(lengths = hold(&held, lengths_object, 1, INT64, n, "lengths"))
        || !(payload_offsets = hold(&held, payload_offsets_object, 1, INT64, n, "payload offsets"))
        || !(payload_lengths = hold(&held, payload_lengths_object, 1, INT64, n, "payload lengths"))
        || !(buffer = hold(&held, buffer_object, 1, BYTES, buffer_bytes, "buffer")))
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
    int64_t *payload_offset = payload_offsets->buf, *payload_length = payload_lengths->buf;
    unsigned char *out = buffer->buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t carried = floats - start[i] < per_fragment ? floats - start[i] : per_fragment;
        offset[i] = (int64_t)i * HEADER_BYTES;
        length[i] = HEADER_BYTES;
        store_be32(out + offset[i], job);
        store_be32(out + offset[i] + 4, number);
        store_be32(out + offset[i] + 8, index[i]);
        store_be32(out + offset[i] + 12, count);
        store_be64(out + offset[i] + 16, mask[i]);
        payload_offset[i] = 4 * start[i];
        payload_length[i] = 4 * carried;
    }
    result = PyLong_FromSsize_t(n);
done:
    release_held(&held);
    return result;
}
