/* The wire's float32s added to a summing node's sums: the loop gcc vectorises at -O3,
 * built for AVX2 and for any x86-64 (or for the machine alone elsewhere); the loader
 * picks the one this CPU runs (an ifunc). The wire's floats are little-endian, this
 * host's order (native.h), so a payload is read where it lies, and sent from the
 * caller's own array (native_send.c). */

#include "native.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define SUM_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define SUM_LOOP
#endif

/* sums[i] += the float32 payload[i] (a datagram's payload: it need not be aligned). */
SUM_LOOP void add_floats(float *restrict sums, const unsigned char *restrict payload,
                         Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        float value;
        memcpy(&value, payload + 4 * i, 4);
        sums[i] += value;
    }
}
