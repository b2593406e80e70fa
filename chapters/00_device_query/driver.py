# SPDX-License-Identifier: MIT
"""Chapter 00 device_query: the backend, the toolchain, and every device's properties.

    python3 driver.py            print what this machine has and which device the course picks
    python3 driver.py --check    the tests (make check runs each exercise on its own)
"""
import ctypes
import functools
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "common"))
import tut  # noqa: E402

CH = tut.Chapter(0, "00_device_query")
I = ctypes.c_int
IP = ctypes.POINTER(ctypes.c_int)


class DeviceInfo(ctypes.Structure):
    """Mirror of `device_info` in device_query.cu, field by field (query checks the size)."""
    _fields_ = [
        ("name", ctypes.c_char * 256),
        ("major", I), ("minor", I),
        ("total_global_mem", ctypes.c_longlong),
        ("multiprocessor_count", I),
        ("max_threads_per_block", I),
        ("max_block_dim", I * 3),
        ("max_grid_dim", I * 3),
        ("warp_size", I),
        ("shared_mem_per_block", ctypes.c_longlong),
        ("shared_mem_per_block_optin", ctypes.c_longlong),
        ("shared_mem_per_multiprocessor", ctypes.c_longlong),
        ("regs_per_block", I),
        ("l2_cache_size", I),
        ("memory_clock_khz", I),
        ("memory_bus_width", I),
        ("async_engine_count", I),
        ("concurrent_managed_access", I),
        ("memory_pools_supported", I),
        ("pageable_memory_access", I),
        ("unified_addressing", I),
    ]


@functools.cache
def c_api(lib):
    api = SimpleNamespace(
        # int theoretical_bandwidth(int memory_clock_khz, int bus_width_bits, double *gb_per_s)
        theoretical_bandwidth=lib.bind("theoretical_bandwidth",
                                       [I, I, ctypes.POINTER(ctypes.c_double)]),
        # int choose_device(const device_info *devices, int count, int *chosen)
        choose_device=lib.bind("choose_device", [ctypes.POINTER(DeviceInfo), I, IP], out=(2,)),
        # int query_versions(int *driver, int *runtime)
        query_versions=lib.bind("query_versions", [IP, IP]),
        # const char *toolchain(void)
        toolchain=lib.bind("toolchain", [], ctypes.c_char_p, status=False),
        # int query_device(int dev, device_info *out)
        query_device=lib.bind("query_device", [I, ctypes.POINTER(DeviceInfo)]),
        # int use_device(int dev)
        use_device=lib.bind("use_device", [I]),
        # int device_info_size(void)
        device_info_size=lib.bind("device_info_size", [], status=False),
    )
    if api.device_info_size() != ctypes.sizeof(DeviceInfo):
        raise RuntimeError(f"DeviceInfo is {ctypes.sizeof(DeviceInfo)} bytes in Python but "
                           f"{api.device_info_size()} in C: the two definitions differ")
    return api


# ---- Python entry points ------------------------------------------------------------------------
def theoretical_bandwidth(lib, memory_clock_khz, bus_width_bits):
    tut.check_count(memory_clock_khz, "memory_clock_khz")
    tut.check_count(bus_width_bits, "bus_width_bits")
    out = ctypes.c_double(0)
    c_api(lib).theoretical_bandwidth(memory_clock_khz, bus_width_bits, ctypes.byref(out))
    return out.value


def query_device(lib, dev):
    info = DeviceInfo()
    c_api(lib).query_device(tut.check_count(dev, "dev"), ctypes.byref(info))
    return info


def choose_device(lib, infos):
    # One device more than count, after the end: the best of all (new, pools, 1 PiB), so a
    # loop that runs one step too far picks it instead of reading whatever follows the array.
    sentinel = DeviceInfo(name=b"past the end", major=9, minor=0, memory_pools_supported=1,
                          total_global_mem=1 << 50)
    array = (DeviceInfo * (len(infos) + 1))(*infos, sentinel)
    chosen = ctypes.c_int(-2)
    c_api(lib).choose_device(array, len(infos), ctypes.byref(chosen))
    return chosen.value


def versions(lib):
    driver, runtime = ctypes.c_int(0), ctypes.c_int(0)
    c_api(lib).query_versions(ctypes.byref(driver), ctypes.byref(runtime))
    return driver.value, runtime.value


def version_text(v):
    return f"{v // 1000}.{(v % 1000) // 10}"


# ---- references ---------------------------------------------------------------------------------
def reference_bandwidth(memory_clock_khz, bus_width_bits):
    # double data rate: 2 transfers per clock, each bus_width_bits / 8 bytes wide
    return 2 * memory_clock_khz * 1e3 * bus_width_bits / 8 / 1e9


def reference_choice(infos):
    # CUDA 13 builds for compute capability 7.5 and newer only (nvcc --list-gpu-arch)
    ok = [i for i, d in enumerate(infos)
          if (d.major, d.minor) >= (7, 5) and d.memory_pools_supported]
    return max(ok, key=lambda i: (infos[i].total_global_mem, -i)) if ok else -1


def fake_device(rng, major=None, pools=None, mem=None, minor=None):
    d = DeviceInfo()
    d.name = b"made-up GPU"
    d.major = int(rng.integers(5, 11)) if major is None else major
    d.minor = int(rng.choice([0, 2, 5, 6, 7, 9])) if minor is None else minor
    d.memory_pools_supported = int(rng.integers(0, 2)) if pools is None else pools
    d.total_global_mem = int(rng.integers(1, 200)) << 30 if mem is None else mem
    return d


# ---- tests --------------------------------------------------------------------------------------
@CH.exercise(1, "theoretical_bandwidth: peak DRAM GB/s from the memory clock and bus width")
def test_bandwidth(ctx):
    cases = [(3_201_000, 6016), (1_593_000, 5120), (9_501_000, 384), (0, 256), (1, 8)]
    cases += [(int(ctx.rng.integers(100_000, 20_000_000)), int(ctx.rng.integers(1, 1024)) * 32)
              for _ in range(20)]
    for clock, bus in cases:
        got, want = theoretical_bandwidth(ctx.lib, clock, bus), reference_bandwidth(clock, bus)
        if not abs(got - want) <= 1e-9 * max(want, 1.0):
            raise AssertionError(f"theoretical_bandwidth({clock} kHz, {bus} bits) = {got}, "
                                 f"want {want} GB/s")


@CH.exercise(2, "choose_device: the stated rule on made-up machines")
def test_choose(ctx):
    machines = [
        [],                                                        # no GPU at all
        [fake_device(ctx.rng, 6, 1, 80 << 30)],                    # too old
        [fake_device(ctx.rng, 9, 0, 80 << 30)],                    # no memory pools
        [fake_device(ctx.rng, 8, 1, 40 << 30), fake_device(ctx.rng, 9, 1, 80 << 30)],
        [fake_device(ctx.rng, 9, 1, 80 << 30), fake_device(ctx.rng, 9, 1, 80 << 30)],  # tie
        [fake_device(ctx.rng, 6, 1, 99 << 30), fake_device(ctx.rng, 7, 1, 16 << 30, 5)],
        # a V100 (7.0) passes a major-only rule but CUDA 13 cannot build for it; a T4 (7.5) can
        [fake_device(ctx.rng, 7, 1, 32 << 30, 0), fake_device(ctx.rng, 7, 1, 16 << 30, 5)],
        [fake_device(ctx.rng, 7, 1, 32 << 30, 2)],                 # 7.2 (Xavier): too old
    ]
    machines += [[fake_device(ctx.rng) for _ in range(int(ctx.rng.integers(1, 9)))]
                 for _ in range(30)]
    for infos in machines:
        got, want = choose_device(ctx.lib, infos), reference_choice(infos)
        if got != want:
            desc = ", ".join(f"#{i}: cc {d.major}.{d.minor} pools={d.memory_pools_supported} "
                             f"{d.total_global_mem >> 30} GiB" for i, d in enumerate(infos))
            raise AssertionError(f"choose_device([{desc}]) = {got}, want {want}")


@CH.check("properties", "every device's properties are read and plausible")
def test_properties(ctx):
    driver, runtime = versions(ctx.lib)
    assert runtime >= 12040, f"runtime {runtime}: the course needs CUDA 12.4 or newer"
    # Minor-version compatibility: any 13.y driver runs a 13.x runtime (and a 12.x one); the
    # driver's major must be at least the runtime's (an older driver major fails every call
    # with cudaErrorInsufficientDriver).
    assert driver // 1000 >= runtime // 1000, (
        f"driver {version_text(driver)} is of an older major version than runtime "
        f"{version_text(runtime)}")
    for dev in range(ctx.lib.device_count()):
        d = query_device(ctx.lib, dev)
        assert d.name, "empty device name"
        assert d.warp_size == 32, d.warp_size
        assert d.max_threads_per_block == 1024, d.max_threads_per_block
        assert list(d.max_block_dim) == [1024, 1024, 64], list(d.max_block_dim)
        assert list(d.max_grid_dim) == [2**31 - 1, 65535, 65535], list(d.max_grid_dim)
        assert d.shared_mem_per_block == 48 * 1024, d.shared_mem_per_block
        assert d.shared_mem_per_block_optin >= d.shared_mem_per_block
        assert d.total_global_mem > 0 and d.memory_clock_khz > 0 and d.memory_bus_width > 0
        free, total = ctx.lib.mem_info()
        assert total == d.total_global_mem, (total, d.total_global_mem)
        c_api(ctx.lib).use_device(dev)
    tut.expect_cuda_error(ctx.lib, "cudaErrorInvalidDevice",
                          lambda: query_device(ctx.lib, ctx.lib.device_count()),
                          "query_device of one past the last device")
    tut.expect_raises(ValueError, lambda: query_device(ctx.lib, -1),   # refused in Python
                      "query_device(-1)")


# ---- demo ---------------------------------------------------------------------------------------
def demo(lib):
    api = c_api(lib)
    driver, runtime = versions(lib)
    print(f"backend   : {lib.backend}  ({tut.library_path(CH.name)})")
    print(f"toolchain : {api.toolchain().decode()}")
    print(f"CUDA      : runtime {version_text(runtime)}, driver supports up to "
          f"{version_text(driver)}")
    infos = [query_device(lib, dev) for dev in range(lib.device_count())]
    for dev, d in enumerate(infos):
        print(f"\ndevice {dev}: {d.name.decode()} (compute capability {d.major}.{d.minor})")
        rows = [
            ("global memory", f"{d.total_global_mem / 2**30:.1f} GiB"),
            ("multiprocessors", d.multiprocessor_count),
            ("threads per block, max", d.max_threads_per_block),
            ("block dims, max", tuple(d.max_block_dim)),
            ("grid dims, max", tuple(d.max_grid_dim)),
            ("warp size", d.warp_size),
            ("shared memory per block", f"{d.shared_mem_per_block // 1024} KiB "
                                        f"({d.shared_mem_per_block_optin // 1024} KiB opt-in)"),
            ("shared memory per SM", f"{d.shared_mem_per_multiprocessor // 1024} KiB"),
            ("L2 cache", f"{d.l2_cache_size / 2**20:.0f} MiB"),
            ("memory clock x bus", f"{d.memory_clock_khz / 1000:.0f} MHz x "
                                   f"{d.memory_bus_width} bits"),
            ("copy engines", d.async_engine_count),
            ("memory pools", bool(d.memory_pools_supported)),
            ("concurrent managed access", bool(d.concurrent_managed_access)),
            ("pageable memory access", bool(d.pageable_memory_access)),
        ]
        for what, value in rows:
            print(f"  {what:<28} {value}")
        try:
            bw = theoretical_bandwidth(lib, d.memory_clock_khz, d.memory_bus_width)
            print(f"  {'theoretical bandwidth':<28} {bw:.0f} GB/s")
        except tut.ExerciseNotDone as e:
            print(f"  {'theoretical bandwidth':<28} (exercise 00.1 not done: {e.where})")
    try:
        chosen = choose_device(lib, infos)
        print(f"\nthe course's rule picks device {chosen}" if chosen >= 0 else
              "\nno device meets the course's rule (cc >= 7.5 with memory pools)")
    except tut.ExerciseNotDone as e:
        print(f"\n(exercise 00.2 not done: {e.where})")
    print("To hide or reorder GPUs for one program: CUDA_VISIBLE_DEVICES=1 make run CH=00")
    print("\nNext: make check CH=00 (the tests of your exercises)")


def bench(lib):
    """The theoretical bandwidth next to what a copy reaches: the figures the lesson quotes."""
    b = tut.Bench(lib, "00 device query")
    d = query_device(lib, 0)   # a fresh process's current device (CUDA_VISIBLE_DEVICES picks it)
    bw = theoretical_bandwidth(lib, d.memory_clock_khz, d.memory_bus_width)
    b.row(f"theoretical DRAM bandwidth: {d.memory_clock_khz / 1000:.0f} MHz x 2 x "
          f"{d.memory_bus_width} bits / 8", bw, "GB/s")
    copy = b.d2d_copy_gbps(1 << 30 if lib.backend == "gpu" else 1 << 22)
    b.figure("device-to-device copy / theoretical bandwidth", 100 * copy / bw, "%", 1)
    # The sizes the memory-hierarchy picture shows (tools/pictures.py reads them from the record)
    b.figure("global memory", d.total_global_mem / 2**30, "GiB", 1)
    b.figure("L2 cache", d.l2_cache_size / 2**20, "MiB", 1)
    b.figure("shared memory per block, opt-in", d.shared_mem_per_block_optin / 1024, "KiB", 0)
    b.figure("shared memory per SM", d.shared_mem_per_multiprocessor / 1024, "KiB", 0)
    b.figure("multiprocessors", d.multiprocessor_count, "SMs", 0)


if __name__ == "__main__":
    sys.exit(CH.main(demo=demo, bench=bench))
