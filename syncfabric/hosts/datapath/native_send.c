/* Sending: fragments built into one buffer, and datagrams sent in batches (sendmmsg),
 * runs of equal datagrams as one UDP GSO send. The caller's ranges, sizes and layout are
 * checked before a byte is written or sent. */

#include "native.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif

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
PyObject *send_batch(PyObject *Py_UNUSED(self), PyObject *args)
{
    int fd, gso;
    Py_ssize_t first, stop;
    uint32_t address;
    int destination_port;
    PyObject *buffer_object, *offsets_object, *lengths_object;
    if (!PyArg_ParseTuple(args, "iOOOnnO&ip", &fd, &buffer_object, &offsets_object,
                          &lengths_object, &first, &stop, uint32_arg, &address,
                          &destination_port, &gso))
        return NULL;
    if (first < 0 || stop < first || destination_port < 0 || destination_port > 65535) {
        PyErr_Format(PyExc_ValueError, "datagrams %zd..%zd to port %d: give 0 <= first <= stop "
                     "and a port in 0..65535", first, stop, destination_port);
        return NULL;
    }
    Held held = {.count = 0};
    Py_buffer *buffer, *offsets, *lengths;
    if (!(buffer = hold(&held, buffer_object, 0, BYTES, 0, "buffer"))
        || !(offsets = hold(&held, offsets_object, 0, INT64, stop, "offsets"))
        || !(lengths = hold(&held, lengths_object, 0, INT64, stop, "lengths"))
        || datagrams_in(buffer, offsets, lengths, first, stop, UDP_MAX_PAYLOAD) < 0) {
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
    struct iovec iovecs[MAX_MESSAGES * GSO_SEND_SEGMENTS];
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
                while (next + run < stop && run < GSO_SEND_SEGMENTS
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

/* build_fragments(buffer, offsets, lengths, job, number, count, indices, masks, values,
 *                 starts, per_fragment, floats) -> datagrams
 * Datagram i carries fragment indices[i] of `count`, for the workers in masks[i]: the
 * header, then values[starts[i]:][:min(per_fragment, floats - starts[i])] as big-endian
 * float32. They lie back to back in `buffer` at offsets[i] (int64, out), lengths[i] long. */
PyObject *build_fragments(PyObject *Py_UNUSED(self), PyObject *args)
{
    uint32_t job, number, count;
    Py_ssize_t per_fragment, floats, datagram_bytes;
    PyObject *buffer_object, *offsets_object, *lengths_object, *indices_object, *masks_object,
        *values_object, *starts_object;
    if (!PyArg_ParseTuple(args, "OOOO&O&O&OOOOnn", &buffer_object, &offsets_object,
                          &lengths_object, uint32_arg, &job, uint32_arg, &number, uint32_arg,
                          &count, &indices_object, &masks_object, &values_object,
                          &starts_object, &per_fragment, &floats))
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
    Py_buffer *buffer, *offsets, *lengths, *indices, *masks, *values, *starts;
    PyObject *result = NULL;
    Py_ssize_t n, buffer_bytes;
    if (!(indices = hold(&held, indices_object, 0, UINT32, 0, "indices")))
        return NULL;
    n = indices->len / 4;
    if (__builtin_mul_overflow(n, datagram_bytes, &buffer_bytes)) {
        PyErr_Format(PyExc_ValueError, "%zd datagrams of %zd bytes overflow", n, datagram_bytes);
        goto done;
    }
    if (!(masks = hold(&held, masks_object, 0, UINT64, n, "masks"))
        || !(starts = hold(&held, starts_object, 0, INT64, n, "starts"))
        || !(values = hold(&held, values_object, 0, FLOAT32, floats, "values"))
        || !(offsets = hold(&held, offsets_object, 1, INT64, n, "offsets"))
        || !(lengths = hold(&held, lengths_object, 1, INT64, n, "lengths"))
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
