"""milc: the MIL compiler and artifact cache, from Python.

A ctypes binding of libmilc (include/milc.h); numpy arrays in and out.

    import milc
    with milc.Cache("/tmp/cache") as cache:
        programs = cache.build("tiny", chunk=1)         # or milc.build(cache, ...)
        with cache.load(programs[0].key) as model:
            outputs = model.run({"x": x})             # {"y": ..., "k_0": ..., ...}

The library is found at $MILC_LIBRARY, else beside this package in a build
tree (build/lib/libmilc.so), else by the system's library search; or pass
its path to milc.load_library first.
"""
import ctypes
import ctypes.util
import os

import numpy as np

__all__ = ["Cache", "Model", "Program", "MilcError", "build", "compile_file", "load_library", "version",
           "OK", "E_INPUT", "E_USAGE", "E_SYSTEM", "E_UNSUPPORTED", "E_NOTFOUND"]

OK, E_INPUT, E_USAGE, E_SYSTEM, E_UNSUPPORTED, E_NOTFOUND = range(6)
MODE_BOTH, MODE_NONBONDED, MODE_BONDED, MODE_DEFAULT = 0, 1, 2, -1
_VERIFY = {"once": 0, "always": 1, "never": 2}
_OUTCOME = {0: "built", 1: "hit-direct", 2: "hit-full"}
_DTYPES = {1: np.float32, 2: np.float16, 3: np.int32, 4: np.bool_, 5: np.uint8, 6: np.int8, 7: np.int16, 8: np.uint16}
_MAX_RANK = 6


class MilcError(Exception):
    """A failed libmilc call: status is one of the E_* codes, message what milc said."""

    def __init__(self, status, message):
        super().__init__(f"{message} (status {status})")
        self.status = status
        self.message = message


class _Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


class _Request(ctypes.Structure):
    _fields_ = [("model", ctypes.c_char_p), ("weights", ctypes.c_char_p), ("params", ctypes.POINTER(_Param)),
                ("nparams", ctypes.c_int), ("mode", ctypes.c_int), ("chunk", ctypes.c_long)]


class _CacheOptions(ctypes.Structure):
    _fields_ = [("template_dirs", ctypes.c_char_p), ("max_memory", ctypes.c_uint64), ("verify", ctypes.c_int),
                ("threads", ctypes.c_int)]


class _ProgramInfo(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char * 33), ("label", ctypes.c_char * 256), ("outcome", ctypes.c_int),
                ("mode", ctypes.c_int), ("artifact_bytes", ctypes.c_uint64), ("ms_total", ctypes.c_double),
                ("ms_compile", ctypes.c_double)]


class _ArtifactInfo(ctypes.Structure):
    _fields_ = [("mode", ctypes.c_int), ("bytes", ctypes.c_uint64), ("sections", ctypes.c_int),
                ("description", ctypes.c_char * 160), ("compile_ns", ctypes.c_uint64), ("hits", ctypes.c_uint64)]


class _TensorInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("dtype", ctypes.c_int), ("rank", ctypes.c_int),
                ("dims", ctypes.c_int64 * _MAX_RANK), ("bytes", ctypes.c_size_t), ("bounded", ctypes.c_int)]


class _Shape(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("rank", ctypes.c_int), ("dims", ctypes.c_int64 * _MAX_RANK)]


class _CompileOptions(ctypes.Structure):
    _fields_ = [("mode", ctypes.c_int), ("function", ctypes.c_char_p), ("shapes", ctypes.POINTER(_Shape)),
                ("nshapes", ctypes.c_int)]


class _RunStats(ctypes.Structure):
    _fields_ = [("dispatches", ctypes.c_uint64), ("ops", ctypes.c_uint64), ("seconds", ctypes.c_double)]


class _PrewarmResult(ctypes.Structure):
    _fields_ = [("programs", ctypes.c_int), ("built", ctypes.c_int), ("hits", ctypes.c_int), ("failed", ctypes.c_int)]


_lib = None
_P = ctypes.c_void_p


def _declare(lib):
    sigs = {
        "milc_version": (ctypes.c_char_p, []),
        "milc_strerror": (ctypes.c_char_p, [ctypes.c_int]),
        "milc_last_error": (ctypes.c_char_p, []),
        "milc_cache_open": (ctypes.c_int, [ctypes.POINTER(_P), ctypes.c_char_p, ctypes.POINTER(_CacheOptions)]),
        "milc_cache_close": (None, [_P]),
        "milc_build": (ctypes.c_int, [_P, ctypes.POINTER(_Request), ctypes.POINTER(_P)]),
        "milc_build_count": (ctypes.c_int, [_P]),
        "milc_build_program": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_ProgramInfo)]),
        "milc_build_free": (None, [_P]),
        "milc_request_param": (ctypes.c_int, [_P, ctypes.POINTER(_Request), ctypes.c_char_p, ctypes.c_char_p,
                                               ctypes.c_size_t]),
        "milc_prewarm": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(_PrewarmResult)]),
        "milc_artifact_info": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(_ArtifactInfo)]),
        "milc_model_load": (ctypes.c_int, [_P, ctypes.c_char_p, ctypes.POINTER(_P)]),
        "milc_model_load_file": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(_P)]),
        "milc_compile_file": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int]),
        "milc_compile_file_with": (ctypes.c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.POINTER(_CompileOptions)]),
        "milc_model_free": (None, [_P]),
        "milc_model_ninputs": (ctypes.c_int, [_P]),
        "milc_model_noutputs": (ctypes.c_int, [_P]),
        "milc_model_input": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_TensorInfo)]),
        "milc_model_output": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_TensorInfo)]),
        "milc_model_output_shape": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_TensorInfo)]),
        "milc_model_mode": (ctypes.c_int, [_P]),
        "milc_model_run": (ctypes.c_int, [_P, ctypes.POINTER(_P), ctypes.POINTER(_P), ctypes.POINTER(_RunStats)]),
        "milc_model_nstates": (ctypes.c_int, [_P]),
        "milc_model_state": (ctypes.c_int, [_P, ctypes.c_int, ctypes.POINTER(_TensorInfo)]),
        "milc_model_state_read": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_size_t]),
        "milc_model_state_write": (ctypes.c_int, [_P, ctypes.c_int, _P, ctypes.c_size_t]),
        "milc_model_reset_states": (ctypes.c_int, [_P]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype, f.argtypes = res, args


def load_library(path=None):
    """Load libmilc (once): path, else $MILC_LIBRARY, the build tree, the system's search."""
    global _lib
    if _lib is not None and path is None:
        return _lib
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [path, os.environ.get("MILC_LIBRARY"),
                  os.path.join(here, "..", "..", "build", "lib", "libmilc.so"), ctypes.util.find_library("milc")]
    for c in candidates:
        if c and (os.path.exists(c) or not os.path.dirname(c)):
            lib = ctypes.CDLL(c)
            _declare(lib)
            _lib = lib
            return lib
    raise OSError("libmilc not found: build it (cmake --build build), install it, or set MILC_LIBRARY")


def _check(status):
    if status != OK:
        raise MilcError(status, _lib.milc_last_error().decode(errors="replace"))


def _b(s):
    return None if s is None else str(s).encode()


def version():
    return load_library().milc_version().decode()


class Program:
    """One program of a build: its artifact's key and how it was obtained."""

    def __init__(self, info):
        self.key = info.key.decode()
        self.label = info.label.decode(errors="replace")
        self.outcome = _OUTCOME.get(info.outcome, str(info.outcome))
        self.mode = info.mode
        self.artifact_bytes = info.artifact_bytes
        self.ms_total = info.ms_total
        self.ms_compile = info.ms_compile

    def __repr__(self):
        return f"Program({self.key} {self.outcome} {self.label!r})"


class _Req:
    """A MilcRequest and the memory it points into."""

    def __init__(self, model, weights, mode, chunk, params):
        self._strings = [(_b(k), _b(v)) for k, v in params.items()]
        arr = (_Param * max(len(self._strings), 1))(*[_Param(k, v) for k, v in self._strings])
        self._arr = arr
        self.req = _Request(_b(model), _b(weights), arr, len(self._strings),
                            MODE_DEFAULT if mode is None else int(mode), int(chunk))


class Cache:
    """A milc cache directory, opened (created if needed).

    template_dirs: ':'-separated template directories (default: the installed ones);
    verify: "once" (default), "always" or "never" (how hits are checked);
    threads: worker threads of each model loaded (0: every CPU)."""

    def __init__(self, path, template_dirs=None, max_memory=0, verify="once", threads=0):
        load_library()
        opts = _CacheOptions(_b(template_dirs), int(max_memory), _VERIFY[verify], int(threads))
        h = _P()
        _check(_lib.milc_cache_open(ctypes.byref(h), _b(os.fspath(path)), ctypes.byref(opts)))
        self._h = h
        self._models = []

    def close(self):
        """Close the cache, after every model loaded from it."""
        for m in self._models:
            m.close()
        self._models = []
        if self._h:
            _lib.milc_cache_close(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_h", None):
            self.close()

    def build(self, model="gpt2", weights=None, mode=None, chunk=0, **params):
        """Build the request's programs or find them: a list of Program, chunks in order.

        params are template parameters (a comma list makes one program per value)."""
        r = _Req(model, weights, mode, chunk, params)
        h = _P()
        _check(_lib.milc_build(self._h, ctypes.byref(r.req), ctypes.byref(h)))
        try:
            out = []
            for i in range(_lib.milc_build_count(h)):
                info = _ProgramInfo()
                _check(_lib.milc_build_program(h, i, ctypes.byref(info)))
                out.append(Program(info))
            return out
        finally:
            _lib.milc_build_free(h)

    def param(self, name, model="gpt2", **params):
        """The resolved value of a template parameter ("dim", "rope_theta"), as text."""
        r = _Req(model, None, None, 0, params)
        buf = ctypes.create_string_buffer(512)
        _check(_lib.milc_request_param(self._h, ctypes.byref(r.req), _b(name), buf, len(buf)))
        return buf.value.decode()

    def prewarm(self, manifest):
        """Build every request of a prewarm manifest file: counts as a dict."""
        res = _PrewarmResult()
        _check(_lib.milc_prewarm(self._h, _b(os.fspath(manifest)), ctypes.byref(res)))
        return {f: getattr(res, f) for f, _ in _PrewarmResult._fields_}

    def artifact_info(self, key):
        info = _ArtifactInfo()
        _check(_lib.milc_artifact_info(self._h, _b(key), ctypes.byref(info)))
        return {"mode": info.mode, "bytes": info.bytes, "sections": info.sections,
                "description": info.description.decode(errors="replace"), "compile_ns": info.compile_ns,
                "hits": info.hits}

    def load(self, key):
        """The cached artifact of key, loaded: a Model (closed with the cache at the latest)."""
        h = _P()
        _check(_lib.milc_model_load(self._h, _b(key), ctypes.byref(h)))
        m = Model(h)
        self._models.append(m)
        return m


def build(cache, model="gpt2", weights=None, mode=None, chunk=0, **params):
    """Cache.build on cache (a Cache, or a directory opened for the call)."""
    if isinstance(cache, Cache):
        return cache.build(model, weights, mode, chunk, **params)
    with Cache(cache) as c:
        return c.build(model, weights, mode, chunk, **params)


def compile_file(path, out_path, mode=None, function=None, shapes=None):
    """A MIL program (model.mil, a folder holding one, a .mlpackage) compiled
    into the artifact file out_path, no cache: `milc compile`.  Load it with
    Model.load_file.  function: the one compiled (default: main, or the only
    one); shapes: {input: shape} for inputs of flexible shape (`--shape`)."""
    load_library()
    shapes = dict(shapes or {})
    arr = (_Shape * max(len(shapes), 1))()
    for i, (name, dims) in enumerate(shapes.items()):
        dims = [int(d) for d in dims]
        if len(dims) > _MAX_RANK:
            raise MilcError(E_USAGE, f"shape of {name}: {len(dims)} dimensions, at most {_MAX_RANK}")
        arr[i].name, arr[i].rank = _b(name), len(dims)
        for j, d in enumerate(dims):
            arr[i].dims[j] = d
    o = _CompileOptions(MODE_DEFAULT if mode is None else int(mode), _b(function) if function else None, arr,
                        len(shapes))
    _check(_lib.milc_compile_file_with(_b(os.fspath(path)), _b(os.fspath(out_path)), ctypes.byref(o)))


class TensorInfo:
    def __init__(self, t):
        self.name = t.name.decode()
        self.dtype = np.dtype(_DTYPES[t.dtype])
        self.shape = tuple(t.dims[i] for i in range(t.rank))
        self.nbytes = t.bytes
        # an output whose rows are counted at run time: shape[0] is their bound
        self.bounded = bool(t.bounded)

    def __repr__(self):
        return f"{self.name}: {self.dtype} {list(self.shape)}"


class Model:
    """A loaded program: run(inputs) on numpy arrays, outputs as new arrays."""

    def __init__(self, handle):
        self._h = handle
        self.inputs = [self._info(_lib.milc_model_input, i) for i in range(_lib.milc_model_ninputs(handle))]
        self.outputs = [self._info(_lib.milc_model_output, i) for i in range(_lib.milc_model_noutputs(handle))]
        self.mode = _lib.milc_model_mode(handle)
        self.last_stats = None

    @classmethod
    def load_file(cls, path, threads=0):
        """An artifact file (`milc compile -o`), loaded."""
        load_library()
        h = _P()
        _check(_lib.milc_model_load_file(_b(os.fspath(path)), int(threads), ctypes.byref(h)))
        return cls(h)

    def _info(self, fn, i):
        t = _TensorInfo()
        _check(fn(self._h, i, ctypes.byref(t)))
        return TensorInfo(t)

    def close(self):
        if self._h:
            _lib.milc_model_free(self._h)
            self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def run(self, inputs):
        """inputs: {name: array} for every input (converted to the input's dtype,
        shape checked).  Returns {name: array} of every output."""
        if not self._h:
            raise MilcError(E_USAGE, "the model is closed")
        missing = [t.name for t in self.inputs if t.name not in inputs]
        extra = [k for k in inputs if k not in {t.name for t in self.inputs}]
        if missing or extra:
            raise MilcError(E_USAGE, f"inputs missing {missing}, unknown {extra}")
        ins = []
        for t in self.inputs:
            a = np.ascontiguousarray(inputs[t.name], dtype=t.dtype)
            if a.shape != t.shape:
                raise MilcError(E_USAGE, f"input {t.name}: shape {list(a.shape)}, the model takes {list(t.shape)}")
            ins.append(a)
        outs = [np.empty(t.shape, t.dtype) for t in self.outputs]
        inp = (_P * max(len(ins), 1))(*[a.ctypes.data for a in ins])
        outp = (_P * max(len(outs), 1))(*[a.ctypes.data for a in outs])
        st = _RunStats()
        _check(_lib.milc_model_run(self._h, inp, outp, ctypes.byref(st)))
        self.last_stats = {"dispatches": st.dispatches, "ops": st.ops, "seconds": st.seconds}
        for i, t in enumerate(self.outputs):  # a bounded output: the rows the run wrote
            if t.bounded:
                outs[i] = outs[i][:self._info(_lib.milc_model_output_shape, i).shape[0]].copy()
        return {t.name: a for t, a in zip(self.outputs, outs)}

    # ---- states: buffers the model keeps from run to run (run keeps them) ----

    @property
    def states(self):
        """The model's states (TensorInfo each): buffers it keeps between runs."""
        return [self._info(_lib.milc_model_state, i) for i in range(_lib.milc_model_nstates(self._h))]

    def _state_index(self, key):
        if isinstance(key, str):
            for i, t in enumerate(self.states):
                if t.name == key:
                    return i, t
            raise MilcError(E_USAGE, f"no state {key!r}; the model has {[t.name for t in self.states]}")
        sts = self.states
        if not 0 <= key < len(sts):
            raise MilcError(E_USAGE, f"state {key}: the model has {len(sts)}")
        return key, sts[key]

    def read_state(self, key):
        """The current value of state key (its name or index), as its own dtype."""
        i, t = self._state_index(key)
        a = np.empty(t.shape, t.dtype)
        _check(_lib.milc_model_state_read(self._h, i, a.ctypes.data, a.nbytes))
        return a

    def write_state(self, key, array):
        """Sets state key (its name or index): array of its shape (converted
        to its dtype); another shape is an error (E_INPUT)."""
        i, t = self._state_index(key)
        a = np.ascontiguousarray(array)
        if a.shape != t.shape:
            raise MilcError(E_INPUT, f"state {t.name}: shape {list(a.shape)}, the model holds {list(t.shape)}")
        if a.dtype.kind != np.dtype(t.dtype).kind:
            raise MilcError(E_INPUT, f"state {t.name}: dtype {a.dtype}, the model holds {np.dtype(t.dtype)}")
        a = np.ascontiguousarray(a, dtype=t.dtype)
        _check(_lib.milc_model_state_write(self._h, i, a.ctypes.data, a.nbytes))

    def reset_states(self):
        _check(_lib.milc_model_reset_states(self._h))
