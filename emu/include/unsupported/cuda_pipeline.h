/* SPDX-License-Identifier: MIT */
/* <cuda_pipeline.h> for the CPU emulator: stops the build at the #include line (the compiler names it
   above this error) instead of letting the toolkit's copy be found, which would not compile. */
#error "not supported here: the C++ pipeline API (cuda_pipeline.h; cuda_pipeline_primitives.h is offered) (<cuda_pipeline.h>); the CPU emulator runs the CUDA runtime API, see docs/no-gpu.md"
