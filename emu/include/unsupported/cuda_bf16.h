/* SPDX-License-Identifier: MIT */
/* <cuda_bf16.h> for the CPU emulator: stops the build at the #include line (the compiler names it
   above this error) instead of letting the toolkit's copy be found, which would not compile. */
#error "not supported here: the __nv_bfloat16 type (<cuda_bf16.h>); the CPU emulator runs the CUDA runtime API, see docs/no-gpu.md"
