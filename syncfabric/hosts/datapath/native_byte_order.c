/* The wire's big-endian float32s to and from the host's floats: the loops gcc vectorises
 * at -O3. They are built for AVX2 and for any x86-64 (or for the machine alone
 * elsewhere); the loader picks the one this CPU runs (an ifunc). */

#include "native.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define BYTE_ORDER_LOOP __attribute__((target_clones("avx2", "default")))
#else
#define BYTE_ORDER_LOOP
#endif

/* sums[i] += big-endian float32 payload[i]. */
BYTE_ORDER_LOOP void add_big_endian(float *restrict sums, const unsigned char *restrict payload,
                                    Py_ssize_t n)
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
BYTE_ORDER_LOOP void copy_big_endian(unsigned char *restrict out, const float *restrict values,
                                     Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, values + i, 4);
        bits = __builtin_bswap32(bits);
        memcpy(out + 4 * i, &bits, 4);
    }
}

/* values[i] = big-endian float32 payload[i]. */
BYTE_ORDER_LOOP void load_big_endian(float *restrict values,
                                     const unsigned char *restrict payload, Py_ssize_t n)
{
    for (Py_ssize_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, payload + 4 * i, 4);
        bits = __builtin_bswap32(bits);
        memcpy(values + i, &bits, 4);
    }
}
