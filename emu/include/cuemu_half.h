/* SPDX-License-Identifier: MIT */
/*
 * cuemu_half.h: binary16 <-> float conversions by bit pattern, rounding to nearest even as a
 * GPU's __float2half_rn does. C and C++ alike: cuda_fp16.h's __half and the NCCL subset's
 * ncclFloat16 reductions (emu/runtime/nccl.c) both use them.
 */
#ifndef CUEMU_HALF_H
#define CUEMU_HALF_H
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline unsigned short cuemu_f2h_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    unsigned short sign = (unsigned short)((u >> 16) & 0x8000u);
    int exp = (int)((u >> 23) & 0xFFu);
    uint32_t mant = u & 0x7FFFFFu;
    if (exp == 255) return (unsigned short)(sign | 0x7C00u | (mant ? 0x200u | (mant >> 13) : 0u));
    int e = exp - 127 + 15;
    if (e >= 31) return (unsigned short)(sign | 0x7C00u);
    if (e <= 0) {                             /* a subnormal half, or zero */
        if (e < -10) return sign;
        mant |= 0x800000u;
        int shift = 14 - e;
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) h++;
        return (unsigned short)(sign | h);
    }
    uint32_t h = ((uint32_t)e << 10) | (mant >> 13), rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++;   /* a carry may make it inf */
    return (unsigned short)(sign | h);
}
static inline float cuemu_h2f_bits(unsigned short h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, u;
    if (exp == 0) {
        float v = (float)ldexp((double)mant, -24);
        return sign ? -v : v;
    }
    if (exp == 31) u = sign | 0x7F800000u | (mant << 13);
    else u = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
