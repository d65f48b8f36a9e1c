/* Receiving: datagrams in batches (recvmmsg), a GRO datagram cut back into its segments.
 * What the kernel hands over is checked before it is used: a datagram longer than its
 * slot, a control message cut short or malformed, or a GRO datagram of more segments
 * than the kernel may make is dropped and counted, and room is checked before every
 * segment is written. cut_messages runs the same rule on scripted recvmmsg results, for
 * the tests and the fuzzers. */

#include "native.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>

#ifndef UDP_GRO
#define UDP_GRO 104
#endif

/* A receive's control buffer: room for UDP_GRO's int, as the kernel writes it. */
#define CONTROL_BYTES CMSG_SPACE(sizeof(int))

/* The segments a call writes, and the datagrams it dropped: `truncated` (longer than a
 * slot, or a control message cut short or malformed) and `oversized` (more segments than
 * MOST_SEGMENTS, or than the arrays have room for). */
typedef struct {
    int64_t *offset, *length;
    uint32_t *source;
    uint16_t *port;
    Py_ssize_t capacity, count, truncated, oversized;
} Segments;

/* The GRO segment size `header`'s control messages name (0: none, the datagram is one
 * segment); -1 if they cannot be read: cut short (MSG_CTRUNC), a length outside the
 * control buffer, or a UDP_GRO message without a positive int. */
static int gro_segment_size(struct msghdr *header)
{
    if (header->msg_flags & MSG_CTRUNC)
        return -1;
    const char *end = (const char *)header->msg_control + header->msg_controllen;
    int size = 0;
    for (struct cmsghdr *cmsg = CMSG_FIRSTHDR(header); cmsg; cmsg = CMSG_NXTHDR(header, cmsg)) {
        if (cmsg->cmsg_len < CMSG_LEN(0) || cmsg->cmsg_len > (size_t)(end - (const char *)cmsg))
            return -1;
        if (cmsg->cmsg_level != SOL_UDP || cmsg->cmsg_type != UDP_GRO)
            continue;
        if (cmsg->cmsg_len < CMSG_LEN(sizeof(int)))
            return -1;
        memcpy(&size, CMSG_DATA(cmsg), sizeof(int));
        if (size <= 0)
            return -1;
    }
    return size;
}

/* Cut the message `header` received into its slot (msg_len `size` bytes at `at` in the
 * buffer, of slot_bytes) into segments, or drop and count it. */
static void cut_message(Segments *out, struct msghdr *header, Py_ssize_t size,
                        Py_ssize_t slot_bytes, Py_ssize_t at, uint32_t source, uint16_t port)
{
    int segment_size = (header->msg_flags & MSG_TRUNC) ? -1 : gro_segment_size(header);
    if (segment_size < 0 || size < 0 || size > slot_bytes) {
        out->truncated++;
        return;
    }
    Py_ssize_t segment = segment_size > 0 ? segment_size : size;
    Py_ssize_t pieces = size == 0 ? 1 : size / segment + (size % segment != 0);
    if (pieces > MOST_SEGMENTS || pieces > out->capacity - out->count) {
        out->oversized++;
        return;
    }
    Py_ssize_t start = 0;
    for (Py_ssize_t k = 0; k < pieces; k++) {   /* an empty datagram is one empty segment */
        Py_ssize_t i = out->count++;
        out->offset[i] = at + start;
        out->length[i] = size - start < segment ? size - start : segment;
        out->source[i] = source;
        out->port[i] = port;
        start += segment;
    }
}

/* Hold a call's output arrays (offsets, lengths int64; sources uint32; ports uint16, as
 * many entries each) in `held` and describe them in `out`; -1 with an error set. */
static int hold_segments(Held *held, Segments *out, PyObject *offsets, PyObject *lengths,
                         PyObject *sources, PyObject *ports)
{
    Py_buffer *offset, *length, *source, *port;
    if (!(offset = hold(held, offsets, 1, INT64, MOST_SEGMENTS, "offsets")))
        return -1;
    Py_ssize_t capacity = offset->len / 8;
    if (!(length = hold(held, lengths, 1, INT64, capacity, "lengths"))
        || !(source = hold(held, sources, 1, UINT32, capacity, "sources"))
        || !(port = hold(held, ports, 1, UINT16, capacity, "ports")))
        return -1;
    *out = (Segments){.offset = offset->buf, .length = length->buf, .source = source->buf,
                      .port = port->buf, .capacity = capacity};
    return 0;
}

/* Hold a receive's buffer (writable to receive into) as `buffer`, and its output arrays,
 * in `held`, described in `out`. The slots of slot_bytes the buffer holds (at most
 * MAX_MESSAGES); -1 with an error set, ValueError for a slot size that holds no datagram
 * or a buffer without a slot. */
static Py_ssize_t hold_receive(Held *held, Segments *out, Py_buffer **buffer,
                               PyObject *buffer_object, int writable, Py_ssize_t slot_bytes,
                               PyObject *offsets, PyObject *lengths, PyObject *sources,
                               PyObject *ports)
{
    if (!(*buffer = hold(held, buffer_object, writable, BYTES, 1, "buffer"))
        || hold_segments(held, out, offsets, lengths, sources, ports) < 0)
        return -1;
    if (slot_bytes < 1 || slot_bytes > (*buffer)->len) {
        PyErr_Format(PyExc_ValueError, "slots of %zd bytes in a buffer of %zd: give a positive "
                     "slot size the buffer holds", slot_bytes, (*buffer)->len);
        return -1;
    }
    Py_ssize_t slots = (*buffer)->len / slot_bytes;
    return slots > MAX_MESSAGES ? MAX_MESSAGES : slots;
}

/* recv_batch(fd, buffer, slot_bytes, offsets, lengths, sources, ports)
 *   -> (segments, filled, truncated, oversized)
 * Takes what waits on non-blocking socket fd, a datagram (or GRO datagram) per slot of
 * `buffer`, without waiting, and no more datagrams than the arrays hold if each were cut
 * into MOST_SEGMENTS: so every datagram the kernel may make fits. filled: every slot it
 * asked for took one, so more may wait (else the socket was empty). Segment i is
 * buffer[offsets[i]:][:lengths[i]] from IPv4 sources[i] (host order) and ports[i]. */
PyObject *recv_batch(PyObject *Py_UNUSED(self), PyObject *args)
{
    int fd;
    Py_ssize_t slot_bytes, slots;
    PyObject *buffer_object, *offsets_object, *lengths_object, *sources_object, *ports_object;
    if (!PyArg_ParseTuple(args, "iOnOOOO", &fd, &buffer_object, &slot_bytes, &offsets_object,
                          &lengths_object, &sources_object, &ports_object))
        return NULL;
    Held held = {.count = 0};
    Segments out;
    Py_buffer *buffer;
    if ((slots = hold_receive(&held, &out, &buffer, buffer_object, 1, slot_bytes, offsets_object,
                              lengths_object, sources_object, ports_object)) < 0) {
        release_held(&held);
        return NULL;
    }
    struct mmsghdr messages[MAX_MESSAGES];
    struct iovec iovecs[MAX_MESSAGES];
    struct sockaddr_in addresses[MAX_MESSAGES];
    _Alignas(struct cmsghdr) char controls[MAX_MESSAGES][CONTROL_BYTES];
    int error = 0, got = 0;
    Py_ssize_t batch = out.capacity / MOST_SEGMENTS;
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
    for (int i = 0; i < got; i++)
        cut_message(&out, &messages[i].msg_hdr, messages[i].msg_len, slot_bytes, i * slot_bytes,
                    ntohl(addresses[i].sin_addr.s_addr), ntohs(addresses[i].sin_port));
    Py_END_ALLOW_THREADS

    release_held(&held);
    if (error) {
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return Py_BuildValue("nOnn", out.count, got == batch ? Py_True : Py_False, out.truncated,
                         out.oversized);
}

/* cut_messages(buffer, slot_bytes, messages, offsets, lengths, sources, ports)
 *   -> (segments, truncated, oversized)
 * recv_batch's rule on scripted recvmmsg results: messages[i] = (msg_len, msg_flags,
 * control bytes, source, port) as if received into slot i of `buffer` (its bytes are
 * the caller's); at most the slots, and at most CONTROL_BYTES of control each. */
PyObject *cut_messages(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_ssize_t slot_bytes, slots;
    PyObject *buffer_object, *list, *offsets_object, *lengths_object, *sources_object,
        *ports_object;
    if (!PyArg_ParseTuple(args, "OnOOOOO", &buffer_object, &slot_bytes, &list, &offsets_object,
                          &lengths_object, &sources_object, &ports_object))
        return NULL;
    Held held = {.count = 0};
    Segments out;
    Py_buffer *buffer;
    PyObject *messages = NULL, *result = NULL;
    if ((slots = hold_receive(&held, &out, &buffer, buffer_object, 0, slot_bytes, offsets_object,
                              lengths_object, sources_object, ports_object)) < 0
        || !(messages = PySequence_Fast(list, "messages must be a sequence")))
        goto done;
    if (PySequence_Fast_GET_SIZE(messages) > slots) {
        PyErr_Format(PyExc_ValueError, "%zd messages for %zd slots",
                     PySequence_Fast_GET_SIZE(messages), slots);
        goto done;
    }
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(messages); i++) {
        unsigned int size, source;
        int flags, port;
        const char *control;
        Py_ssize_t control_bytes;
        _Alignas(struct cmsghdr) char copy[CONTROL_BYTES];
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(messages, i), "O&iy#O&i", uint32_arg,
                              &size, &flags, &control, &control_bytes, uint32_arg, &source, &port))
            goto done;
        if (control_bytes > (Py_ssize_t)sizeof(copy) || port < 0 || port > 65535) {
            PyErr_Format(PyExc_ValueError, "message %zd: at most %zu bytes of control and a "
                         "port in 0..65535", i, sizeof(copy));
            goto done;
        }
        memcpy(copy, control, control_bytes);
        struct msghdr header = {.msg_control = copy, .msg_controllen = control_bytes,
                                .msg_flags = flags};
        cut_message(&out, &header, size, slot_bytes, i * slot_bytes, source, (uint16_t)port);
    }
    result = Py_BuildValue("nnn", out.count, out.truncated, out.oversized);
done:
    Py_XDECREF(messages);
    release_held(&held);
    return result;
}
