/* The native data path, a C extension that native.py drives: datagrams moved in batches
 * (recvmmsg, sendmmsg, UDP GSO and GRO), fragments built and summed in place, each call
 * releasing the GIL while it moves or sums bytes. The wire format and every rule of a
 * summing node are python.py's, which is the reference: see its docstrings. Its parts:
 *   native_receive.c    recv_batch, and cut_messages (the same rule on scripted results)
 *   native_send.c       send_batch, build_fragments
 *   native_sum.c        sum_fragments, place_sums
 *   native_buffers.c    the arguments every call checks first
 *   native_floats.c     the wire's float32s summed */

#include "native.h"

static PyMethodDef methods[] = {
    {"recv_batch", recv_batch, METH_VARARGS, "Take a batch of datagrams (recvmmsg, GRO)."},
    {"cut_messages", cut_messages, METH_VARARGS,
     "recv_batch's cutting of scripted recvmmsg results (tests, fuzzers)."},
    {"send_batch", send_batch, METH_VARARGS, "Send a batch of datagrams (sendmmsg, GSO)."},
    {"build_fragments", build_fragments, METH_VARARGS, "Build fragment datagrams."},
    {"sum_fragments", sum_fragments, METH_VARARGS, "A summing node's batch of fragments."},
    {"place_sums", place_sums, METH_VARARGS, "A worker's batch of returned sums."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native",
                                    "syncfabric's native data path (datapath/native.py).", -1,
                                    methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m = PyModule_Create(&module);
    if (m != NULL && (PyModule_AddIntConstant(m, "MOST_SEGMENTS", MOST_SEGMENTS) < 0
                      || PyModule_AddIntConstant(m, "REPEATED", REPEATED) < 0)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
