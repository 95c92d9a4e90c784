/* simcuda_tensormap.c: cuTensorMapEncodeTiled for the stand-in driver.
 *
 * Why here and not in Python: a tensor map is pure host-side encoding, and the real driver checks
 * its arguments when it is encoded (CUDA_ERROR_INVALID_VALUE), long before any launch. The rules
 * below are the ones the CUDA driver API documents for cuTensorMapEncodeTiled; a map the real
 * driver would accept but ptxgen's simulator cannot run (interleaved layouts, packed 4/6-bit
 * types, the 128B_ATOM swizzles) is refused with CUDA_ERROR_NOT_SUPPORTED, never mis-encoded.
 *
 * The 128 bytes are written in the layout ptxgen/sim/tensormap.py decodes (its _LAYOUT, packed,
 * little endian), with the map's global address as a stand-in device address; the launch
 * (standin.py) turns that address into the simulator's memory. Byte 127, unused by the
 * simulator, keeps the CUtensorMapDataType so the launch knows the element type (NaN fill).
 */
#include <stdio.h>
#include "simcuda.h"

#define MAP_MAGIC 0x50414D5447585450ull   /* "PTXGTMAP", ptxgen/sim/tensormap.py MAGIC */
#define MAX_RANK 5

/* element bytes of each CUtensorMapDataType (0 = not a type), and whether it is floating point */
static const int type_bytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4, 1, 1, 1};
static const int type_float[] = {0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
enum { PACKED_FIRST = 13, PACKED_LAST = 15, INTERLEAVE_NONE = 0, INTERLEAVE_32B = 2, SWIZZLE_NONE = 0,
       SWIZZLE_128B = 3, SWIZZLE_LAST = 6, L2_LAST = 3, OOB_NAN = 1, OOB_LAST = 1 };

/* NaN bit patterns (as numpy writes np.nan in each type) for NAN_REQUEST_ZERO_FMA fill */
static uint64_t nan_pattern(int type) {
    switch (type) {
    case 6: return 0x7E00;                        /* f16 */
    case 9: return 0x7FC0;                        /* bf16 */
    case 8: return 0x7FF8000000000000ull;         /* f64 */
    default: return 0x7FC00000;                   /* f32, f32 ftz, tf32 */
    }
}

static CUresult refuse(CUresult code, const char *why, unsigned long long value) {
    char text[400];
    snprintf(text, sizeof(text), "cuTensorMapEncodeTiled: %s (got %llu)", why, value);
    simcuda_set_reason(text);
    fprintf(stderr, "[ptxgen sim driver] %s\n", text);
    return code;
}

CUresult cuTensorMapEncodeTiled(void *map, int type, unsigned rank, void *address, const uint64_t *dims,
                                const uint64_t *strides, const uint32_t *box, const uint32_t *estrides,
                                int interleave, int swizzle, int l2, int oob) {
    NEED_CONTEXT();
    if (!map || !dims || !box || !estrides || (rank > 1 && !strides))
        return refuse(INVALID_VALUE, "a NULL array or map pointer", 0);
    if (type < 0 || type > PACKED_LAST) return refuse(INVALID_VALUE, "tensorDataType is not a CUtensorMapDataType", (unsigned)type);
    if (rank < 1 || rank > MAX_RANK) return refuse(INVALID_VALUE, "tensorRank must be 1..5", rank);
    if (interleave < INTERLEAVE_NONE || interleave > INTERLEAVE_32B)
        return refuse(INVALID_VALUE, "interleave is not a CUtensorMapInterleave", (unsigned)interleave);
    if (interleave != INTERLEAVE_NONE && rank < 3)
        return refuse(INVALID_VALUE, "an interleaved layout needs tensorRank >= 3", rank);
    if (swizzle < SWIZZLE_NONE || swizzle > SWIZZLE_LAST)
        return refuse(INVALID_VALUE, "swizzle is not a CUtensorMapSwizzle", (unsigned)swizzle);
    if (l2 < 0 || l2 > L2_LAST) return refuse(INVALID_VALUE, "l2Promotion is not a CUtensorMapL2promotion", (unsigned)l2);
    if (oob < 0 || oob > OOB_LAST) return refuse(INVALID_VALUE, "oobFill is not a CUtensorMapFloatOOBfill", (unsigned)oob);
    int esize = type_bytes[type];
    uint64_t align = (interleave == INTERLEAVE_32B || type == 14 || type == 15) ? 32 : 16;
    if ((uintptr_t)address % align)
        return refuse(INVALID_VALUE, "globalAddress must be 16-byte aligned (32 for 32B interleave)",
                      (unsigned long long)(uintptr_t)address % align);
    for (unsigned i = 0; i < rank; i++)
        if (dims[i] == 0 || dims[i] > (1ull << 32)) return refuse(INVALID_VALUE, "globalDim must be 1..2^32", dims[i]);
    for (unsigned i = 0; i + 1 < rank; i++)
        if (strides[i] % align || strides[i] >= (1ull << 40))
            return refuse(INVALID_VALUE, "globalStrides must be multiples of 16 bytes (32 for 32B interleave) "
                          "and below 2^40", strides[i]);
    for (unsigned i = 0; i < rank; i++) {
        if (box[i] == 0 || box[i] > 256) return refuse(INVALID_VALUE, "boxDim must be 1..256", box[i]);
        if (estrides[i] == 0 || estrides[i] > 8) return refuse(INVALID_VALUE, "elementStrides must be 1..8", estrides[i]);
    }
    uint64_t inner = (uint64_t)box[0] * (uint64_t)esize;
    if (interleave == INTERLEAVE_NONE && inner % 16)
        return refuse(INVALID_VALUE, "boxDim[0] * element size must be a multiple of 16 bytes", inner);
    if (interleave == INTERLEAVE_32B && swizzle != 1)
        return refuse(INVALID_VALUE, "32B interleave needs the 32B swizzle", (unsigned)swizzle);
    uint64_t span = swizzle == 1 ? 32 : swizzle == 2 ? 64 : swizzle >= SWIZZLE_128B ? 128 : 0;
    if (interleave == INTERLEAVE_NONE && span && inner > span)
        return refuse(INVALID_VALUE, "boxDim[0] * element size must not exceed the swizzle width", inner);
    if (oob == OOB_NAN && !type_float[type])
        return refuse(INVALID_VALUE, "NaN out-of-bounds fill needs a floating-point tensorDataType", (unsigned)type);
    /* valid for the driver; what the simulator does not model is refused, not mis-encoded */
    if (type >= PACKED_FIRST) return refuse(NOT_SUPPORTED, "packed 4/6-bit types are not simulated", (unsigned)type);
    if (interleave != INTERLEAVE_NONE) return refuse(NOT_SUPPORTED, "interleaved layouts are not simulated", (unsigned)interleave);
    if (swizzle > SWIZZLE_128B) return refuse(NOT_SUPPORTED, "the 128B_ATOM swizzles are not simulated", (unsigned)swizzle);

    unsigned char out[128];
    memset(out, 0, sizeof(out));
    uint64_t magic = MAP_MAGIC, addr = (uint64_t)(uintptr_t)address, fill = oob == OOB_NAN ? nan_pattern(type) : 0;
    uint32_t r32 = rank, es32 = (uint32_t)esize, nan32 = oob == OOB_NAN, sw32 = (uint32_t)span;
    memcpy(out + 0, &magic, 8); memcpy(out + 8, &addr, 8); memcpy(out + 16, &r32, 4);
    memcpy(out + 20, &es32, 4); memcpy(out + 24, &nan32, 4); memcpy(out + 28, &sw32, 4);
    memcpy(out + 32, &fill, 8);
    for (unsigned i = 0; i < rank; i++) {
        uint16_t b = (uint16_t)box[i];
        /* elementStrides[0] is ignored without interleave (the driver's documentation) */
        unsigned char e = (unsigned char)(i == 0 ? 1 : estrides[i]);
        memcpy(out + 40 + 8 * i, &dims[i], 8);
        memcpy(out + 112 + 2 * i, &b, 2);
        out[122 + i] = e;
        if (i + 1 < rank) memcpy(out + 80 + 8 * i, &strides[i], 8);
    }
    out[127] = (unsigned char)type;
    memcpy(map, out, sizeof(out));
    return OK;
}
