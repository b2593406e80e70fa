// SPDX-License-Identifier: MIT
// Every C++17 standard library header, included after the emulator's force-included
// cuda_runtime.h, as a student's program would. libstdc++ 13 and newer spell
// __attribute__((__noinline__)) in <string>: a __noinline__ macro defined carelessly breaks
// <string>, <iostream>, <random> and most of the rest (emu/include/cuemu_device.h). Compiled
// with every installed compiler by emu/tests/nvcc/test_nvcc.py (case std-headers).
#include <algorithm>
#include <any>
#include <array>
#include <atomic>
#include <bitset>
#include <cassert>
#include <cctype>
#include <cerrno>
#include <cfenv>
#include <cfloat>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <clocale>
#include <cmath>
#include <complex>
#include <condition_variable>
#include <csetjmp>
#include <csignal>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuchar>
#include <cwchar>
#include <cwctype>
#include <deque>
#include <exception>
#include <execution>
#include <filesystem>
#include <forward_list>
#include <fstream>
#include <functional>
#include <future>
#include <initializer_list>
#include <iomanip>
#include <ios>
#include <iosfwd>
#include <iostream>
#include <istream>
#include <iterator>
#include <limits>
#include <list>
#include <locale>
#include <map>
#include <memory>
#include <memory_resource>
#include <mutex>
#include <new>
#include <numeric>
#include <optional>
#include <ostream>
#include <queue>
#include <random>
#include <ratio>
#include <regex>
#include <scoped_allocator>
#include <set>
#include <shared_mutex>
#include <sstream>
#include <stack>
#include <stdexcept>
#include <streambuf>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <typeindex>
#include <typeinfo>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <valarray>
#include <variant>
#include <vector>
#include <codecvt>
// Not here: C++17's deprecated <ccomplex>, <ciso646>, <cstdalign>, <cstdbool>, <ctgmath> and
// <strstream>, which newer compilers warn about (or have removed) by themselves.

// __noinline__ and __forceinline__ themselves still work on the program's own functions.
__device__ __noinline__ int twice(int v) { return 2 * v; }
__device__ __forceinline__ int plus_one(int v) { return v + 1; }

__global__ void fill(int *out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = plus_one(twice(i));
}

int main()
{
    const int n = 100;
    int *d = nullptr;
    std::vector<int> h(n);
    cudaMalloc(&d, n * sizeof(int));
    fill<<<(n + 31) / 32, 32>>>(d, n);
    cudaMemcpy(h.data(), d, n * sizeof(int), cudaMemcpyDeviceToHost);
    cudaFree(d);
    std::mt19937 gen(7);
    std::uniform_int_distribution<int> pick(0, n - 1);
    int i = pick(gen);
    std::ostringstream msg;
    msg << "std headers: " << (h[i] == 2 * i + 1 && std::accumulate(h.begin(), h.end(), 0) == n * n
                               ? "ok" : "wrong");
    std::cout << std::string(msg.str()) << std::endl;
    return 0;
}
