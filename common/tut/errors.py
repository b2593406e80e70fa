# SPDX-License-Identifier: MIT
"""The exceptions a chapter's C code turns into, and the status and exit codes they come from."""
TUT_ERR_TODO = -1   # same values as common/tut_check.h
TUT_ERR_ARG = -2
TUT_ERR_NEWER_CUDA = -3   # a call the toolkit the library was built with lacks: a Skip
TUT_ERR_LIBRARY = -100   # this and below: a chapter's own errors (LibraryError)
EXIT_PASS, EXIT_FAIL, EXIT_SKIP = 0, 1, 77


# Errors meaning "there is no usable GPU here" rather than "the code is wrong".
NO_GPU_ERRORS = ("cudaErrorNoDevice", "cudaErrorInsufficientDriver")

# Byte written over every output and guard zone before a test runs. As float32 it reads
# 3.39e38, as int32 2139062143: no correct kernel produces either by accident.
POISON_BYTE = 0x7F


# ---- exceptions ----------------------------------------------------------------------------
class CudaError(RuntimeError):
    """A CUDA call failed. .code is the cudaError_t value, .name its name
    (cudaErrorInvalidValue...), .where the C file:line, .expr the failing expression."""

    def __init__(self, code, name, message, where="", expr="", diagnostic=""):
        text = f"{name} ({code}): {message}"
        if diagnostic:
            text += "\n" + diagnostic.rstrip()
        super().__init__(text)
        self.code, self.name, self.where, self.expr = code, name, where, expr
        self.diagnostic = diagnostic


class ExerciseNotDone(NotImplementedError):
    """The library reached a TODO(student) hole. .where is its file:line."""

    def __init__(self, where):
        super().__init__(f"exercise not done yet: TODO(student) at {where}")
        self.where = where


class LibraryError(RuntimeError):
    """A chapter's own C code refused something (a pool's double free, a foreign pointer...):
    not a CUDA error. .code (<= -100) and .name ("TPOOL_ERR_DOUBLE_FREE") say which, .where the
    C file:line; the message is the C code's sentence."""

    def __init__(self, code, name, message, where=""):
        super().__init__(f"{name} ({code}): {message}")
        self.code, self.name, self.where = code, name, where


class NotBuilt(RuntimeError):
    """The chapter's library did not build: its last build failed, so no older library is
    tested in its place. .error is the compiler's first error (the student's file:line and
    message), .log_path the file that holds the whole compiler output."""

    def __init__(self, library, error, log_path):
        super().__init__(f"not built: {error}" if error else f"{library} did not build")
        self.library, self.error, self.log_path = library, error, log_path


class Skip(Exception):
    """This test cannot run here (a capability the device lacks): exit code 77."""
