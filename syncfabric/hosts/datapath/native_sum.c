/* Summing: a summing node's batch of fragments added in place (sum_fragments), and a
 * worker's batch of returned sums placed (place_sums), each by python.py's rule. Every
 * field of a datagram is checked before it is used: its length, job, fragment count and
 * index, the workers it names against its sender's, and its round against the rounds
 * the node keeps (a round it does not keep goes to the node's own rule, which holds the
 * window of rounds: job_roles). */

#include "native.h"

static const char CONTROL_MAGIC[4] = {'S', 'F', 'J', 'C'};   /* job_roles.CONTROL_MAGIC */

/* sum_fragments(buffer, offsets, lengths, sources, first, n, job, count, per_fragment,
 *               floats, held_floats, slots, sender_addresses, sender_masks, expected,
 *               rounds, window_low, window_high, status, completed)
 *   -> (stop, completed pairs, [bytes received per round], dropped, out of window,
 *       repeated: how many of datagrams first..stop-1 have each of these statuses)
 * A summing node's rule (python.py: PythonDatapath.sum_fragments) for datagrams 0..n-1:
 * a fragment of the job from a sender allowed its workers, for a kept round
 * (rounds: [(number, sums float32 of held_floats, have uint64)]; fragment i's sums at
 * slots[i] * per_fragment, none where slots[i] < 0: gradient_wire.HeldFragments), of
 * exactly its fragment's length, is added unless a worker in it was
 * counted already or is not expected, or it is not a fragment held. status[i] (int8,
 * out) says what became of it: ADDED, COMPLETED (its fragment now holds every expected
 * worker; (round, fragment) appended to `completed`, int64 pairs), DROPPED, REPEATED (its
 * fragment was complete already), OUT_OF_WINDOW (a round not kept, outside the node's
 * window: window_low < round <= window_high, round_window.RoundWindow.bounds). It stops
 * at datagram `stop` (n: none) that it leaves to the node, in order: a control message, a
 * fragment it does not sum (another core's: core_split.py), or a round not kept inside
 * the window, which the node opens, forgetting its oldest if it keeps all it may (that
 * oldest is then at most window_low + 1: no round in the window is older). */
PyObject *sum_fragments(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_ssize_t first, n, per_fragment, floats, held_floats;
    uint32_t job, count;
    long long window_low, window_high;
    PyObject *buffer_object, *offsets_object, *lengths_object, *sources_object,
        *slots_object, *addresses_object, *masks_object, *expected_object, *rounds_object,
        *status_object, *completed_object;
    if (!PyArg_ParseTuple(args, "OOOOnnO&O&nnnOOOOOLLOO", &buffer_object, &offsets_object,
                          &lengths_object, &sources_object, &first, &n, uint32_arg, &job,
                          uint32_arg, &count, &per_fragment, &floats, &held_floats, &slots_object,
                          &addresses_object, &masks_object, &expected_object, &rounds_object,
                          &window_low, &window_high, &status_object, &completed_object))
        return NULL;
    if (check_layout(count, per_fragment, floats) < 0)
        return NULL;
    if (held_floats < 0 || n < 0 || first < 0 || first > n) {
        PyErr_Format(PyExc_ValueError, "datagrams %zd..%zd into %zd floats: give 0 <= first <= n "
                     "and no negative number of floats", first, n, held_floats);
        return NULL;
    }
    Rounds rounds;
    Held held = {.count = 0};
    Py_buffer *slot_view, *addresses, *masks, *expecteds, *statuses, *completions;
    PyObject *result = NULL;
    if (hold_rounds(rounds_object, &rounds, held_floats, UINT64, count) < 0
        || hold_batch(&held, buffer_object, offsets_object, lengths_object, sources_object, n) < 0
        || !(slot_view = hold(&held, slots_object, 0, INT64, count, "slots"))
        || !(addresses = hold(&held, addresses_object, 0, UINT32, 0, "sender addresses"))
        || !(masks = hold(&held, masks_object, 0, UINT64, addresses->len / 4, "sender masks"))
        || !(expecteds = hold(&held, expected_object, 0, UINT64, count, "expected"))
        || !(statuses = hold(&held, status_object, 1, INT8, n, "status"))
        || !(completions = hold(&held, completed_object, 1, INT64, 2 * n, "completed")))
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
        if (round == NULL) {   /* refused as the node would refuse it, or one it opens */
            if ((long long)number <= window_low || (long long)number > window_high) {
                status[i] = OUT_OF_WINDOW;
                continue;
            }
            status[i] = TO_PYTHON;
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
            add_floats(sums, packet + HEADER_BYTES, carried);
        else   /* the first is copied: the array may hold an older round's sums */
            memcpy(sums, packet + HEADER_BYTES, 4 * carried);
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

    Py_ssize_t counts[OUT_OF_WINDOW + 1] = {0};   /* datagrams first..stop-1 by status */
    for (Py_ssize_t i = first; i < stop; i++)
        counts[status[i]]++;
    PyObject *received = received_per_round(&rounds);
    if (received == NULL)
        goto done;
    result = Py_BuildValue("nnNnnn", stop, complete_count, received, counts[DROPPED],
                           counts[OUT_OF_WINDOW], counts[REPEATED]);
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
PyObject *place_sums(PyObject *Py_UNUSED(self), PyObject *args)
{
    Py_ssize_t n, per_fragment, floats;
    uint32_t shard_address, job, first, last, count;
    unsigned long long everyone;
    PyObject *buffer_object, *offsets_object, *lengths_object, *sources_object,
        *block_of_object, *rounds_object;
    if (!PyArg_ParseTuple(args, "OOOOnO&O&KO&O&O&nnOO", &buffer_object, &offsets_object,
                          &lengths_object, &sources_object, &n, uint32_arg, &shard_address,
                          uint32_arg, &job, &everyone, uint32_arg, &first, uint32_arg, &last,
                          uint32_arg, &count, &per_fragment, &floats, &block_of_object,
                          &rounds_object))
        return NULL;
    if (check_layout(count, per_fragment, floats) < 0)
        return NULL;
    if (n < 0) {
        PyErr_SetString(PyExc_ValueError, "a batch of a negative number of datagrams");
        return NULL;
    }
    Rounds rounds;
    Held held = {.count = 0};
    Py_buffer *blocks;
    PyObject *result = NULL;
    Py_ssize_t result_floats;
    if (__builtin_mul_overflow((Py_ssize_t)count, per_fragment, &result_floats)) {
        PyErr_SetString(PyExc_ValueError, "a worker's result of count * per_fragment overflows");
        return NULL;
    }
    if (hold_rounds(rounds_object, &rounds, result_floats, BOOL, count) < 0
        || hold_batch(&held, buffer_object, offsets_object, lengths_object, sources_object, n) < 0
        || !(blocks = hold(&held, block_of_object, 0, INT64, count, "block_of")))
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
            memcpy((float *)round->sums.buf + block_of[index] * per_fragment,
                   packet + HEADER_BYTES, length[i] - HEADER_BYTES);
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
