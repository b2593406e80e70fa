/* SPDX-License-Identifier: MIT */
/*
 * cuda_fp16.h for the CPU emulator: the IEEE binary16 types __half and __half2 (half, half2)
 * with CUDA's conversions, operators and the common intrinsics, bit-compatible with a GPU's
 * (a __half is the 16-bit pattern; conversions from float round to nearest even, as
 * __float2half_rn does). Arithmetic is done in float or double and rounded once to half,
 * which gives what the GPU's half instructions give for +, -, *, fma (the exact result
 * rounded once). Host and device code both see it, as with CUDA's header.
 */
#ifndef __CUDA_FP16_H__
#define __CUDA_FP16_H__
#define __CUDA_FP16_HPP__
#include "cuda_runtime.h"
#ifdef __cplusplus
#include "cuemu_half.h"

struct __attribute__((aligned(2))) __half {
    unsigned short __x;
    __half() = default;
    __half(float f) : __x(cuemu_f2h_bits(f)) {}
    __half(double d) : __x(cuemu_f2h_bits((float)d)) {}
    __half(int i) : __x(cuemu_f2h_bits((float)i)) {}
    __half(unsigned int i) : __x(cuemu_f2h_bits((float)i)) {}
    __half(long long i) : __x(cuemu_f2h_bits((float)i)) {}
    __half(unsigned long long i) : __x(cuemu_f2h_bits((float)i)) {}
    __half(short i) : __x(cuemu_f2h_bits((float)i)) {}
    __half(unsigned short i) : __x(cuemu_f2h_bits((float)i)) {}
    operator float() const { return cuemu_h2f_bits(__x); }
};
typedef __half half;
struct __half_raw { unsigned short x; };

struct __attribute__((aligned(4))) __half2 {
    __half x, y;
    __half2() = default;
    __half2(const __half &a, const __half &b) : x(a), y(b) {}
};
typedef __half2 half2;

static inline float __half2float(__half h) { return (float)h; }
static inline __half __float2half(float f) { return __half(f); }
static inline __half __float2half_rn(float f) { return __half(f); }
static inline __half __double2half(double d) { return __half(d); }
static inline __half2 __float2half2_rn(float f) { return __half2(__half(f), __half(f)); }
static inline __half2 __floats2half2_rn(float a, float b) { return __half2(__half(a), __half(b)); }
static inline __half2 __halves2half2(__half a, __half b) { return __half2(a, b); }
static inline __half2 __half2half2(__half a) { return __half2(a, a); }
static inline float2 __half22float2(__half2 h) { return make_float2((float)h.x, (float)h.y); }
static inline __half2 __float22half2_rn(float2 f) { return __half2(__half(f.x), __half(f.y)); }
static inline float __low2float(__half2 h) { return (float)h.x; }
static inline float __high2float(__half2 h) { return (float)h.y; }
static inline __half __low2half(__half2 h) { return h.x; }
static inline __half __high2half(__half2 h) { return h.y; }
static inline __half2 __lows2half2(__half2 a, __half2 b) { return __half2(a.x, b.x); }
static inline __half2 __highs2half2(__half2 a, __half2 b) { return __half2(a.y, b.y); }
static inline __half2 __lowhigh2highlow(__half2 a) { return __half2(a.y, a.x); }
static inline unsigned short __half_as_ushort(__half h) { return h.__x; }
static inline short __half_as_short(__half h) { return (short)h.__x; }
static inline __half __ushort_as_half(unsigned short u) { __half h; h.__x = u; return h; }
static inline __half __short_as_half(short s) { __half h; h.__x = (unsigned short)s; return h; }
static inline __half __int2half_rn(int i) { return __half((float)i); }
static inline int __half2int_rz(__half h) { return (int)(float)h; }
static inline int __half2int_rn(__half h) { return (int)std::nearbyint((float)h); }

/* one rounding from the exact (float or double) result, as the GPU's half units do */
static inline __half __hadd(__half a, __half b) { return __half((float)a + (float)b); }
static inline __half __hsub(__half a, __half b) { return __half((float)a - (float)b); }
static inline __half __hmul(__half a, __half b) { return __half((float)a * (float)b); }
static inline __half __hdiv(__half a, __half b) { return __half((float)a / (float)b); }
static inline __half __hfma(__half a, __half b, __half c)
{ return __half((float)((double)(float)a * (double)(float)b + (double)(float)c)); }
static inline __half __hneg(__half a) { a.__x ^= 0x8000u; return a; }
static inline __half __habs(__half a) { a.__x &= 0x7FFFu; return a; }
static inline __half __hmax(__half a, __half b) { return (float)a >= (float)b || std::isnan((float)b) ? a : b; }
static inline __half __hmin(__half a, __half b) { return (float)a <= (float)b || std::isnan((float)b) ? a : b; }
static inline __half hsqrt(__half a) { return __half(std::sqrt((float)a)); }
static inline __half hrsqrt(__half a) { return __half(1.0f / std::sqrt((float)a)); }
static inline __half hexp(__half a) { return __half(std::exp((float)a)); }
static inline __half hlog(__half a) { return __half(std::log((float)a)); }
static inline bool __heq(__half a, __half b) { return (float)a == (float)b; }
static inline bool __hne(__half a, __half b) { return (float)a != (float)b && !std::isnan((float)a) && !std::isnan((float)b); }
static inline bool __hlt(__half a, __half b) { return (float)a < (float)b; }
static inline bool __hle(__half a, __half b) { return (float)a <= (float)b; }
static inline bool __hgt(__half a, __half b) { return (float)a > (float)b; }
static inline bool __hge(__half a, __half b) { return (float)a >= (float)b; }
static inline bool __hisnan(__half a) { return std::isnan((float)a); }
static inline int __hisinf(__half a) { return a.__x == 0x7C00u ? 1 : a.__x == 0xFC00u ? -1 : 0; }

static inline __half2 __hadd2(__half2 a, __half2 b) { return __half2(__hadd(a.x, b.x), __hadd(a.y, b.y)); }
static inline __half2 __hsub2(__half2 a, __half2 b) { return __half2(__hsub(a.x, b.x), __hsub(a.y, b.y)); }
static inline __half2 __hmul2(__half2 a, __half2 b) { return __half2(__hmul(a.x, b.x), __hmul(a.y, b.y)); }
static inline __half2 __h2div(__half2 a, __half2 b) { return __half2(__hdiv(a.x, b.x), __hdiv(a.y, b.y)); }
static inline __half2 __hfma2(__half2 a, __half2 b, __half2 c)
{ return __half2(__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)); }
static inline __half2 __hneg2(__half2 a) { return __half2(__hneg(a.x), __hneg(a.y)); }
static inline __half2 __habs2(__half2 a) { return __half2(__habs(a.x), __habs(a.y)); }
static inline __half2 __hmax2(__half2 a, __half2 b) { return __half2(__hmax(a.x, b.x), __hmax(a.y, b.y)); }
static inline __half2 __hmin2(__half2 a, __half2 b) { return __half2(__hmin(a.x, b.x), __hmin(a.y, b.y)); }
static inline __half2 h2sqrt(__half2 a) { return __half2(hsqrt(a.x), hsqrt(a.y)); }
static inline bool __hbeq2(__half2 a, __half2 b) { return __heq(a.x, b.x) && __heq(a.y, b.y); }

static inline __half operator+(const __half &a, const __half &b) { return __hadd(a, b); }
static inline __half operator-(const __half &a, const __half &b) { return __hsub(a, b); }
static inline __half operator*(const __half &a, const __half &b) { return __hmul(a, b); }
static inline __half operator/(const __half &a, const __half &b) { return __hdiv(a, b); }
static inline __half operator-(const __half &a) { return __hneg(a); }
static inline __half operator+(const __half &a) { return a; }
static inline __half &operator+=(__half &a, const __half &b) { return a = __hadd(a, b); }
static inline __half &operator-=(__half &a, const __half &b) { return a = __hsub(a, b); }
static inline __half &operator*=(__half &a, const __half &b) { return a = __hmul(a, b); }
static inline __half &operator/=(__half &a, const __half &b) { return a = __hdiv(a, b); }
static inline bool operator==(const __half &a, const __half &b) { return __heq(a, b); }
static inline bool operator!=(const __half &a, const __half &b) { return !__heq(a, b); }
static inline bool operator<(const __half &a, const __half &b) { return __hlt(a, b); }
static inline bool operator<=(const __half &a, const __half &b) { return __hle(a, b); }
static inline bool operator>(const __half &a, const __half &b) { return __hgt(a, b); }
static inline bool operator>=(const __half &a, const __half &b) { return __hge(a, b); }
static inline __half2 operator+(const __half2 &a, const __half2 &b) { return __hadd2(a, b); }
static inline __half2 operator-(const __half2 &a, const __half2 &b) { return __hsub2(a, b); }
static inline __half2 operator*(const __half2 &a, const __half2 &b) { return __hmul2(a, b); }
static inline __half2 operator/(const __half2 &a, const __half2 &b) { return __h2div(a, b); }
static inline __half2 operator-(const __half2 &a) { return __hneg2(a); }
static inline __half2 &operator+=(__half2 &a, const __half2 &b) { return a = __hadd2(a, b); }
static inline __half2 &operator-=(__half2 &a, const __half2 &b) { return a = __hsub2(a, b); }
static inline __half2 &operator*=(__half2 &a, const __half2 &b) { return a = __hmul2(a, b); }
static inline __half2 &operator/=(__half2 &a, const __half2 &b) { return a = __h2div(a, b); }
static inline bool operator==(const __half2 &a, const __half2 &b) { return __hbeq2(a, b); }
static inline bool operator!=(const __half2 &a, const __half2 &b) { return !__hbeq2(a, b); }

#endif /* __cplusplus */
#endif /* __CUDA_FP16_H__ */
