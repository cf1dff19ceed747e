#pragma once
// GRIDSHARD_KERNEL marks a hot loop that is compiled for several x86-64 levels (AVX-512, AVX2, and the
// baseline), the best one for the CPU chosen once when the program starts (GCC's function
// multiversioning: an ifunc). So a build runs on any x86-64 machine, not only on the one that built it,
// and still uses the vector units it finds there. Every version evaluates the same expressions (no FMA
// contraction: -ffp-contract=off), so they give the same bits; `make test` compares a baseline build
// without versions against this one. Empty where it does not apply: other compilers (clang 14 cannot
// version templates), other CPUs, or GRIDSHARD_DISPATCH=OFF (then -march decides, see GRIDSHARD_ARCH).
// Internal; no MPI.

#if defined(GRIDSHARD_DISPATCH) && defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define GRIDSHARD_KERNEL __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define GRIDSHARD_KERNEL
#endif
