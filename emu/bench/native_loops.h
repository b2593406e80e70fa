// SPDX-License-Identifier: MIT
/*
 * The native loops emu_bench compares the emulated kernels with, written once and compiled
 * twice: in emu_bench.cu with the emulator's own flags (its instrumentation, no vectoriser:
 * the loop the emulator's kernel becomes, minus the emulator), and in native_plain.cpp with
 * plain `-O2` (what a user calls native code). NATIVE_NS names the copy.
 * noinline, and their results checked, so the compiler can neither fold nor drop them.
 */
namespace NATIVE_NS {
__attribute__((noinline)) void vector_add_native(const float *a, const float *b, float *c, int n)
{
    for (int i = 0; i < n; i++) c[i] = a[i] + b[i];
}

// The naive triple loop, summing k in the same order as the tiled kernel: identical floats.
__attribute__((noinline)) void matmul_native(const float *a, const float *b, float *c, int n)
{
    for (int r = 0; r < n; r++)
        for (int col = 0; col < n; col++) {
            float acc = 0.0f;
            for (int k = 0; k < n; k++) acc += a[r * n + k] * b[k * n + col];
            c[r * n + col] = acc;
        }
}

__attribute__((noinline)) void reduce_native(const float *in, float *out, int n, int rb)
{
    for (int b = 0; b * rb < n; b++) {
        float s = 0.0f;
        for (int i = b * rb; i < n && i < (b + 1) * rb; i++) s += in[i];
        out[b] = s;
    }
}

// A 1D stencil of radius R: the sum of the 2R+1 neighbours (0 outside), in the kernel's order.
__attribute__((noinline)) void stencil_native(const float *in, float *out, int n, int r)
{
    for (int i = 0; i < n; i++) {
        float acc = 0.0f;
        for (int k = -r; k <= r; k++) acc += (i + k >= 0 && i + k < n) ? in[i + k] : 0.0f;
        out[i] = acc;
    }
}

__attribute__((noinline)) void histogram_native(const unsigned char *in, unsigned *bins, int n)
{
    for (int b = 0; b < 256; b++) bins[b] = 0;
    for (int i = 0; i < n; i++) bins[in[i]]++;
}
}  // namespace NATIVE_NS
