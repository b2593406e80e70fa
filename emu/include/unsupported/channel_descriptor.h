/* SPDX-License-Identifier: MIT */
/* <channel_descriptor.h> for the CPU emulator: stops the build at the #include line (the compiler names it
   above this error) instead of letting the toolkit's copy be found, which would not compile. */
#error "not supported here: CUDA arrays and textures (<channel_descriptor.h>); the CPU emulator runs the CUDA runtime API, see docs/no-gpu.md"
