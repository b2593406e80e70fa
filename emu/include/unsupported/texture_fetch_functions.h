/* SPDX-License-Identifier: MIT */
/* <texture_fetch_functions.h> for the CPU emulator: stops the build at the #include line (the compiler names it
   above this error) instead of letting the toolkit's copy be found, which would not compile. */
#error "not supported here: textures (<texture_fetch_functions.h>); the CPU emulator runs the CUDA runtime API, see docs/no-gpu.md"
