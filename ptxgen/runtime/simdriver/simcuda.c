/* simcuda.c: a stand-in libcuda.so.1 that runs kernels on ptxgen's CPU simulator.
 *
 * Why: the real `cuda.bindings.driver` loads this library exactly as it loads NVIDIA's driver
 * (it finds "libcuda.so.1" already loaded and asks cuGetProcAddress_v2 for every entry point),
 * so every Python -> C argument conversion in ptxgen's runtime is the real one. This file keeps
 * the driver's bookkeeping (init, the device model, the primary context and which thread has it
 * current, "device memory", streams, events) and enforces the driver's rules for it; modules,
 * functions and launches are handed to Python (ptxgen/runtime/simdriver/standin.py) through
 * callbacks, because reading cubins and running PTX is Python's job there.
 *
 * Device memory lives in host memory, but the addresses handed out lie in a non-canonical range
 * (SIM_DEVICE_BASE) that no host pointer can have: a host pointer passed where a device pointer
 * belongs, or the reverse, is caught instead of silently working.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef void *CUcontext, *CUmodule, *CUfunction, *CUstream, *CUevent;

enum {
    OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, NOT_INITIALIZED = 3, INVALID_DEVICE = 101,
    INVALID_CONTEXT = 201, INVALID_HANDLE = 400, NOT_FOUND = 500, NOT_READY = 600,
    NOT_SUPPORTED = 801, UNKNOWN = 999
};

#define SIM_DEVICE_BASE 0x7ff0000000000000ull
#define CTX_MAGIC 0x5C7Cu
#define STREAM_MAGIC 0x57EAu
#define EVENT_MAGIC 0xE7E7u

/* ---- configuration, set from Python before cuInit (simcuda_configure) -------------------- */
typedef struct {
    char name[128];
    int attrs[160];          /* CUdevice_attribute -> value */
    uint64_t total_mem;
    int driver_version;      /* what cuDriverGetVersion reports, e.g. 13000 */
} DeviceModel;

static DeviceModel model;
static int configured = 0, initialized = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- callbacks into Python ---------------------------------------------------------------- */
typedef int (*load_cb_t)(const void *image, uint64_t len, int is_elf, uint64_t *module);
typedef int (*unload_cb_t)(uint64_t module);
typedef int (*getfn_cb_t)(uint64_t module, const char *name, uint64_t *fn);
typedef int (*fattr_get_cb_t)(uint64_t fn, int attr, int *value);
typedef int (*fattr_set_cb_t)(uint64_t fn, int attr, int value);
typedef int (*launch_cb_t)(uint64_t fn, const uint32_t *dims, uint32_t smem, void **params,
                           const uint32_t *cluster);

static load_cb_t py_load;
static unload_cb_t py_unload;
static getfn_cb_t py_getfn;
static fattr_get_cb_t py_fattr_get;
static fattr_set_cb_t py_fattr_set;
static launch_cb_t py_launch;

/* ---- contexts ----------------------------------------------------------------------------- */
typedef struct { unsigned magic; int device; int retains; } Context;
static Context primary = {CTX_MAGIC, 0, 0};
static __thread Context *current = NULL;

/* ---- memory ------------------------------------------------------------------------------- */
typedef struct { CUdeviceptr base; uint64_t size; unsigned char *host; } Allocation;
static Allocation *allocs = NULL;
static int n_allocs = 0, cap_allocs = 0;
static CUdeviceptr next_device_address = SIM_DEVICE_BASE;
static uint64_t bytes_in_use = 0;

/* ---- streams and events: registered handles only, never dereferenced unchecked ----------- */
typedef struct { unsigned magic; } Handle;
#define MAX_HANDLES 4096
static Handle *handles[MAX_HANDLES];

static int known_handle(void *h, unsigned magic) {
    int found = 0;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_HANDLES && h; i++)
        if (handles[i] == h) { found = handles[i]->magic == magic; break; }
    pthread_mutex_unlock(&lock);
    return found;
}

static CUresult new_handle(void **out, unsigned magic) {
    Handle *h = malloc(sizeof(Handle));
    if (!h) return OUT_OF_MEMORY;
    h->magic = magic;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_HANDLES; i++)
        if (!handles[i]) { handles[i] = h; *out = h; pthread_mutex_unlock(&lock); return OK; }
    pthread_mutex_unlock(&lock);
    free(h);
    return OUT_OF_MEMORY;
}

static CUresult drop_handle(void *h, unsigned magic) {
    CUresult r = INVALID_HANDLE;
    pthread_mutex_lock(&lock);
    for (int i = 0; i < MAX_HANDLES && h; i++)
        if (handles[i] == h && handles[i]->magic == magic) {
            free(handles[i]); handles[i] = NULL; r = OK; break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

/* The rule every context-bound call obeys: init done, and a context current on this thread. */
#define NEED_CONTEXT() do { if (!initialized) return NOT_INITIALIZED; \
    if (!current || current->retains <= 0) return INVALID_CONTEXT; } while (0)

static CUresult check_stream(CUstream s) {
    /* 0 = legacy default, 1 = CU_STREAM_LEGACY, 2 = CU_STREAM_PER_THREAD */
    if ((uintptr_t)s <= 2 || known_handle(s, STREAM_MAGIC)) return OK;
    return INVALID_HANDLE;
}

/* The allocation holding [ptr, ptr+n), or NULL: device ranges must lie inside one allocation. */
static Allocation *find(CUdeviceptr ptr, uint64_t n) {
    for (int i = 0; i < n_allocs; i++) {
        Allocation *a = &allocs[i];
        if (ptr >= a->base && ptr < a->base + a->size && n <= a->base + a->size - ptr) return a;
    }
    return NULL;
}

static int looks_like_device(uint64_t p) { return p >= SIM_DEVICE_BASE; }

/* ---- exported helpers for Python ---------------------------------------------------------- */
int simcuda_is_standin(void) { return 1; }

int simcuda_configure(const DeviceModel *m) {
    if (initialized) return INVALID_VALUE;   /* the model is fixed once cuInit ran */
    model = *m;
    configured = 1;
    return OK;
}

void simcuda_set_callbacks(load_cb_t l, unload_cb_t u, getfn_cb_t g, fattr_get_cb_t fg,
                           fattr_set_cb_t fs, launch_cb_t la) {
    py_load = l; py_unload = u; py_getfn = g; py_fattr_get = fg; py_fattr_set = fs; py_launch = la;
}

/* Host address and allocation bounds for a device pointer (what a launch's kernel may touch). */
int simcuda_translate(CUdeviceptr ptr, void **host, CUdeviceptr *base, uint64_t *size) {
    pthread_mutex_lock(&lock);
    Allocation *a = find(ptr, 0);
    if (a) { *host = a->host + (ptr - a->base); *base = a->base; *size = a->size; }
    pthread_mutex_unlock(&lock);
    return a ? OK : INVALID_VALUE;
}

int simcuda_context_is_current(void) { return current != NULL && current->retains > 0; }

/* ---- init, version, devices --------------------------------------------------------------- */
CUresult cuInit(unsigned flags) {
    if (flags != 0) return INVALID_VALUE;
    if (!configured || !py_launch) return NOT_INITIALIZED;  /* Python side never attached */
    initialized = 1;
    return OK;
}

CUresult cuDriverGetVersion(int *v) {
    if (!v) return INVALID_VALUE;
    *v = model.driver_version;
    return OK;
}

CUresult cuDeviceGetCount(int *n) {
    if (!initialized) return NOT_INITIALIZED;
    if (!n) return INVALID_VALUE;
    *n = 1;
    return OK;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (!initialized) return NOT_INITIALIZED;
    if (!d) return INVALID_VALUE;
    if (ordinal != 0) return INVALID_DEVICE;
    *d = 0;
    return OK;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    if (!initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    if (!name || len <= 0) return INVALID_VALUE;
    strncpy(name, model.name, (size_t)len - 1);
    name[len - 1] = 0;
    return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    if (!initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    if (!v || attr <= 0 || attr >= 160) return INVALID_VALUE;
    *v = model.attrs[attr];
    return OK;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    if (!initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    if (!bytes) return INVALID_VALUE;
    *bytes = model.total_mem;
    return OK;
}

/* ---- the primary context ------------------------------------------------------------------ */
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    if (!initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    if (!ctx) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    primary.retains++;
    pthread_mutex_unlock(&lock);
    *ctx = &primary;
    return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    if (!initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    CUresult r = primary.retains > 0 ? (primary.retains--, OK) : INVALID_CONTEXT;
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (!initialized) return NOT_INITIALIZED;
    if (ctx == NULL) { current = NULL; return OK; }
    if (ctx != &primary || primary.retains <= 0) return INVALID_CONTEXT;
    current = &primary;
    return OK;
}

CUresult cuCtxGetCurrent(CUcontext *ctx) {
    if (!initialized) return NOT_INITIALIZED;
    if (!ctx) return INVALID_VALUE;
    *ctx = current;
    return OK;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return cuCtxSetCurrent(ctx); }

CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    NEED_CONTEXT();
    if (ctx) *ctx = current;
    current = NULL;
    return OK;
}

CUresult cuCtxGetDevice(CUdevice *d) {
    NEED_CONTEXT();
    if (!d) return INVALID_VALUE;
    *d = 0;
    return OK;
}

CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
    NEED_CONTEXT();
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return OK;
}

CUresult cuCtxSynchronize(void) { NEED_CONTEXT(); return OK; }  /* every launch ran to completion */

/* ---- memory ------------------------------------------------------------------------------- */
CUresult cuMemAlloc_v2(CUdeviceptr *out, size_t n) {
    NEED_CONTEXT();
    if (!out || n == 0) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    CUresult r = OK;
    if (bytes_in_use + n > model.total_mem) r = OUT_OF_MEMORY;
    if (r == OK && n_allocs == cap_allocs) {
        int cap = cap_allocs ? cap_allocs * 2 : 64;
        Allocation *grown = realloc(allocs, sizeof(Allocation) * (size_t)cap);
        if (!grown) r = OUT_OF_MEMORY; else { allocs = grown; cap_allocs = cap; }
    }
    unsigned char *host = NULL;
    if (r == OK) {
        /* poison fresh memory (like uninitialised device memory is not zero) */
        host = malloc(n);
        if (!host) r = OUT_OF_MEMORY; else memset(host, 0xA5, n);
    }
    if (r == OK) {
        CUdeviceptr base = next_device_address;
        next_device_address += ((uint64_t)n + 0xFFFF) / 0x10000 * 0x10000 + 0x10000;  /* gaps */
        allocs[n_allocs++] = (Allocation){base, n, host};
        bytes_in_use += n;
        *out = base;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    NEED_CONTEXT();
    pthread_mutex_lock(&lock);
    CUresult r = INVALID_VALUE;
    for (int i = 0; i < n_allocs; i++)
        if (allocs[i].base == p) {
            free(allocs[i].host);
            bytes_in_use -= allocs[i].size;
            allocs[i] = allocs[--n_allocs];
            r = OK;
            break;
        }
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    NEED_CONTEXT();
    if (free_bytes) *free_bytes = model.total_mem - bytes_in_use;
    if (total) *total = model.total_mem;
    return OK;
}

static CUresult copy(void *dst, const void *src, size_t n) { if (n) memmove(dst, src, n); return OK; }

/* Device range -> host address; a host pointer or a range past its allocation is rejected. */
static CUresult device_range(CUdeviceptr p, size_t n, unsigned char **host) {
    Allocation *a = looks_like_device(p) ? find(p, n) : NULL;
    if (!a) return INVALID_VALUE;
    *host = a->host + (p - a->base);
    return OK;
}

static CUresult host_range(const void *p, size_t n) {
    if (p == NULL && n) return INVALID_VALUE;
    return looks_like_device((uint64_t)(uintptr_t)p) ? INVALID_VALUE : OK;  /* a device pointer */
}

/* Copies run under the lock: another thread may free an allocation or grow the table. */
static CUresult htod(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    NEED_CONTEXT();
    CUresult r = check_stream(s);
    if (r != OK) return r;
    unsigned char *d;
    pthread_mutex_lock(&lock);
    if ((r = host_range(src, n)) == OK && (r = device_range(dst, n, &d)) == OK) r = copy(d, src, n);
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult dtoh(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    NEED_CONTEXT();
    CUresult r = check_stream(s);
    if (r != OK) return r;
    unsigned char *h;
    pthread_mutex_lock(&lock);
    if ((r = host_range(dst, n)) == OK && (r = device_range(src, n, &h)) == OK) r = copy(dst, h, n);
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult dtod(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    NEED_CONTEXT();
    CUresult r = check_stream(s);
    if (r != OK) return r;
    unsigned char *d, *h;
    pthread_mutex_lock(&lock);
    if ((r = device_range(dst, n, &d)) == OK && (r = device_range(src, n, &h)) == OK) r = copy(d, h, n);
    pthread_mutex_unlock(&lock);
    return r;
}

static CUresult memset_n(CUdeviceptr dst, uint32_t value, size_t count, int width, CUstream s) {
    NEED_CONTEXT();
    CUresult r = check_stream(s);
    if (r != OK) return r;
    unsigned char *d;
    if ((dst % (uint64_t)width) != 0) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    if ((r = device_range(dst, count * (size_t)width, &d)) == OK)
        for (size_t i = 0; i < count; i++) memcpy(d + i * (size_t)width, &value, (size_t)width);
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { return htod(d, h, n, 0); }
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, CUstream s) { return htod(d, h, n, s); }
CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { return dtoh(h, d, n, 0); }
CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, CUstream s) { return dtoh(h, d, n, s); }
CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s_, size_t n) { return dtod(d, s_, n, 0); }
CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s_, size_t n, CUstream s) { return dtod(d, s_, n, s); }
CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return memset_n(d, v, n, 1, 0); }
CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) { return memset_n(d, v, n, 1, s); }
CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) { return memset_n(d, v, n, 4, 0); }
CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) { return memset_n(d, v, n, 4, s); }

CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
    if (!initialized) return NOT_INITIALIZED;
    if (!data) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    Allocation *a = looks_like_device(p) ? find(p, 0) : NULL;
    pthread_mutex_unlock(&lock);
    if (!a) return INVALID_VALUE;  /* the real driver: not memory it knows */
    switch (attr) {
    case 1: *(CUcontext *)data = &primary; return OK;          /* CONTEXT */
    case 2: *(unsigned *)data = 2; return OK;                  /* MEMORY_TYPE = DEVICE */
    case 3: *(CUdeviceptr *)data = p; return OK;               /* DEVICE_POINTER */
    case 9: *(int *)data = 0; return OK;                       /* DEVICE_ORDINAL... */
    case 11: *(CUdeviceptr *)data = a->base; return OK;        /* RANGE_START_ADDR */
    case 12: *(size_t *)data = a->size; return OK;             /* RANGE_SIZE */
    default: break;
    }
    if (attr == 8 || attr == 10) { *(int *)data = 0; return OK; }  /* IS_MANAGED, LEGACY_IPC: no */
    return INVALID_VALUE;
}

/* ---- streams and events: launches run to completion, so stream order holds trivially ------- */
CUresult cuStreamCreate(CUstream *s, unsigned flags) {
    NEED_CONTEXT();
    if (!s || flags > 1) return INVALID_VALUE;
    return new_handle(s, STREAM_MAGIC);
}
CUresult cuStreamCreateWithPriority(CUstream *s, unsigned flags, int prio) { (void)prio; return cuStreamCreate(s, flags); }
CUresult cuStreamDestroy_v2(CUstream s) { NEED_CONTEXT(); return drop_handle(s, STREAM_MAGIC); }
CUresult cuStreamSynchronize(CUstream s) { NEED_CONTEXT(); return check_stream(s); }
CUresult cuStreamQuery(CUstream s) { NEED_CONTEXT(); return check_stream(s); }

CUresult cuEventCreate(CUevent *e, unsigned flags) {
    NEED_CONTEXT();
    if (!e || flags > 0xF) return INVALID_VALUE;
    return new_handle(e, EVENT_MAGIC);
}
CUresult cuEventDestroy_v2(CUevent e) { NEED_CONTEXT(); return drop_handle(e, EVENT_MAGIC); }
CUresult cuEventRecord(CUevent e, CUstream s) {
    NEED_CONTEXT();
    if (!known_handle(e, EVENT_MAGIC)) return INVALID_HANDLE;
    return check_stream(s);
}
CUresult cuEventSynchronize(CUevent e) { NEED_CONTEXT(); return known_handle(e, EVENT_MAGIC) ? OK : INVALID_HANDLE; }
CUresult cuEventQuery(CUevent e) { NEED_CONTEXT(); return known_handle(e, EVENT_MAGIC) ? OK : INVALID_HANDLE; }
CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
    NEED_CONTEXT();
    if (flags > 1 || !known_handle(e, EVENT_MAGIC)) return INVALID_HANDLE;
    return check_stream(s);
}
/* Simulated time means nothing: refuse rather than invent a number. */
CUresult cuEventElapsedTime(float *ms, CUevent a, CUevent b) { (void)ms; (void)a; (void)b; NEED_CONTEXT(); return NOT_SUPPORTED; }
CUresult cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { return cuEventElapsedTime(ms, a, b); }

/* ---- modules, functions, launches: handed to Python ---------------------------------------- */
static uint64_t elf_length(const unsigned char *p) {
    /* section header table end: e_shoff (0x28) + e_shnum (0x3c) * e_shentsize (0x3a) */
    uint64_t shoff; uint16_t shentsize, shnum;
    memcpy(&shoff, p + 0x28, 8); memcpy(&shentsize, p + 0x3a, 2); memcpy(&shnum, p + 0x3c, 2);
    uint64_t end = shoff + (uint64_t)shentsize * shnum;
    /* program headers may sit after the sections: e_phoff (0x20) + e_phnum (0x38) * e_phentsize (0x36) */
    uint64_t phoff; uint16_t phentsize, phnum;
    memcpy(&phoff, p + 0x20, 8); memcpy(&phentsize, p + 0x36, 2); memcpy(&phnum, p + 0x38, 2);
    uint64_t pend = phoff + (uint64_t)phentsize * phnum;
    return pend > end ? pend : end;
}

static CUresult load(CUmodule *m, const void *image) {
    NEED_CONTEXT();
    if (!m || !image) return INVALID_VALUE;
    const unsigned char *p = image;
    uint64_t id = 0, len;
    int is_elf = memcmp(p, "\x7f" "ELF", 4) == 0;
    len = is_elf ? elf_length(p) : strlen((const char *)p);
    CUresult r = py_load(image, len, is_elf, &id);
    if (r == OK) *m = (CUmodule)(uintptr_t)id;
    return r;
}

CUresult cuModuleLoadData(CUmodule *m, const void *image) { return load(m, image); }
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, int *opts, void **vals) {
    if (n && (!opts || !vals)) return INVALID_VALUE;
    return load(m, image);
}
CUresult cuModuleUnload(CUmodule m) { NEED_CONTEXT(); return py_unload((uint64_t)(uintptr_t)m); }

CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    NEED_CONTEXT();
    if (!f || !name) return INVALID_VALUE;
    uint64_t id = 0;
    CUresult r = py_getfn((uint64_t)(uintptr_t)m, name, &id);
    if (r == OK) *f = (CUfunction)(uintptr_t)id;
    return r;
}

CUresult cuFuncGetAttribute(int *v, int attr, CUfunction f) {
    NEED_CONTEXT();
    if (!v) return INVALID_VALUE;
    return py_fattr_get((uint64_t)(uintptr_t)f, attr, v);
}

CUresult cuFuncSetAttribute(CUfunction f, int attr, int value) {
    NEED_CONTEXT();
    return py_fattr_set((uint64_t)(uintptr_t)f, attr, value);
}

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned smem, CUstream s, void **params,
                        void **extra) {
    NEED_CONTEXT();
    CUresult r = check_stream(s);
    if (r != OK) return r;
    if (extra != NULL) return INVALID_VALUE;  /* ptxgen passes kernelParams only */
    uint32_t dims[6] = {gx, gy, gz, bx, by, bz}, cluster[3] = {1, 1, 1};
    return py_launch((uint64_t)(uintptr_t)f, dims, smem, params, cluster);
}

/* CUlaunchConfig / CUlaunchAttribute as the driver headers lay them out */
typedef struct { int id; int pad; union { unsigned char raw[64]; struct { unsigned x, y, z; } dim; } value; } LaunchAttribute;
typedef struct { unsigned gx, gy, gz, bx, by, bz, smem; CUstream stream; LaunchAttribute *attrs; unsigned nattrs; } LaunchConfig;

CUresult cuLaunchKernelEx(const LaunchConfig *cfg, CUfunction f, void **params, void **extra) {
    NEED_CONTEXT();
    if (!cfg) return INVALID_VALUE;
    CUresult r = check_stream(cfg->stream);
    if (r != OK) return r;
    if (extra != NULL || (cfg->nattrs && !cfg->attrs)) return INVALID_VALUE;
    uint32_t dims[6] = {cfg->gx, cfg->gy, cfg->gz, cfg->bx, cfg->by, cfg->bz}, cluster[3] = {1, 1, 1};
    for (unsigned i = 0; i < cfg->nattrs; i++) {
        if (cfg->attrs[i].id == 4) {  /* CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION */
            cluster[0] = cfg->attrs[i].value.dim.x; cluster[1] = cfg->attrs[i].value.dim.y;
            cluster[2] = cfg->attrs[i].value.dim.z;
        } else {
            return NOT_SUPPORTED;  /* an attribute the stand-in cannot honour */
        }
    }
    return py_launch((uint64_t)(uintptr_t)f, dims, cfg->smem, params, cluster);
}

/* ---- errors ------------------------------------------------------------------------------- */
static const struct { int code; const char *name, *text; } errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {222, "CUDA_ERROR_UNSUPPORTED_PTX_VERSION", "the provided PTX was compiled with an unsupported toolchain."},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch"},
    {719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static int error_index(int code) {
    for (unsigned i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
        if (errors[i].code == code) return (int)i;
    return -1;
}
CUresult cuGetErrorString(int code, const char **s) {
    int i = error_index(code);
    if (!s || i < 0) return INVALID_VALUE;
    *s = errors[i].text;
    return OK;
}
CUresult cuGetErrorName(int code, const char **s) {
    int i = error_index(code);
    if (!s || i < 0) return INVALID_VALUE;
    *s = errors[i].name;
    return OK;
}

/* ---- cuGetProcAddress: how cuda.bindings finds every entry point --------------------------- */
#define ENTRY(base, fn) {base, (void *)fn}
static const struct { const char *name; void *fn; } table[] = {
    ENTRY("cuInit", cuInit), ENTRY("cuDriverGetVersion", cuDriverGetVersion),
    ENTRY("cuDeviceGetCount", cuDeviceGetCount), ENTRY("cuDeviceGet", cuDeviceGet),
    ENTRY("cuDeviceGetName", cuDeviceGetName), ENTRY("cuDeviceGetAttribute", cuDeviceGetAttribute),
    ENTRY("cuDeviceTotalMem", cuDeviceTotalMem_v2),
    ENTRY("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain),
    ENTRY("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2),
    ENTRY("cuCtxSetCurrent", cuCtxSetCurrent), ENTRY("cuCtxGetCurrent", cuCtxGetCurrent),
    ENTRY("cuCtxPushCurrent", cuCtxPushCurrent_v2), ENTRY("cuCtxPopCurrent", cuCtxPopCurrent_v2),
    ENTRY("cuCtxGetDevice", cuCtxGetDevice), ENTRY("cuCtxGetStreamPriorityRange", cuCtxGetStreamPriorityRange), ENTRY("cuCtxSynchronize", cuCtxSynchronize),
    ENTRY("cuMemAlloc", cuMemAlloc_v2), ENTRY("cuMemFree", cuMemFree_v2),
    ENTRY("cuMemGetInfo", cuMemGetInfo_v2),
    ENTRY("cuMemcpyHtoD", cuMemcpyHtoD_v2), ENTRY("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2),
    ENTRY("cuMemcpyDtoH", cuMemcpyDtoH_v2), ENTRY("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2),
    ENTRY("cuMemcpyDtoD", cuMemcpyDtoD_v2), ENTRY("cuMemcpyDtoDAsync", cuMemcpyDtoDAsync_v2),
    ENTRY("cuMemsetD8", cuMemsetD8_v2), ENTRY("cuMemsetD8Async", cuMemsetD8Async),
    ENTRY("cuMemsetD32", cuMemsetD32_v2), ENTRY("cuMemsetD32Async", cuMemsetD32Async),
    ENTRY("cuPointerGetAttribute", cuPointerGetAttribute),
    ENTRY("cuStreamCreate", cuStreamCreate), ENTRY("cuStreamCreateWithPriority", cuStreamCreateWithPriority),
    ENTRY("cuStreamDestroy", cuStreamDestroy_v2), ENTRY("cuStreamSynchronize", cuStreamSynchronize),
    ENTRY("cuStreamQuery", cuStreamQuery), ENTRY("cuStreamWaitEvent", cuStreamWaitEvent),
    ENTRY("cuEventCreate", cuEventCreate), ENTRY("cuEventDestroy", cuEventDestroy_v2),
    ENTRY("cuEventRecord", cuEventRecord), ENTRY("cuEventSynchronize", cuEventSynchronize),
    ENTRY("cuEventQuery", cuEventQuery), ENTRY("cuEventElapsedTime", cuEventElapsedTime_v2),
    ENTRY("cuModuleLoadData", cuModuleLoadData), ENTRY("cuModuleLoadDataEx", cuModuleLoadDataEx),
    ENTRY("cuModuleUnload", cuModuleUnload), ENTRY("cuModuleGetFunction", cuModuleGetFunction),
    ENTRY("cuFuncGetAttribute", cuFuncGetAttribute), ENTRY("cuFuncSetAttribute", cuFuncSetAttribute),
    ENTRY("cuLaunchKernel", cuLaunchKernel), ENTRY("cuLaunchKernelEx", cuLaunchKernelEx),
    ENTRY("cuGetErrorString", cuGetErrorString), ENTRY("cuGetErrorName", cuGetErrorName),
};

/* Names the stand-in was asked for but does not have, for the Python side's diagnostics. */
static char missing[8192];

const char *simcuda_missing_symbols(void) { return missing; }

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, uint64_t flags, int *status) {
    (void)version; (void)flags;  /* one ABI per entry point: the newest, as the bindings use */
    if (!symbol || !pfn) return INVALID_VALUE;
    for (unsigned i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (strcmp(table[i].name, symbol) == 0) {
            *pfn = table[i].fn;
            if (status) *status = 0;  /* CU_GET_PROC_ADDRESS_SUCCESS */
            return OK;
        }
    if (strcmp(symbol, "cuGetProcAddress") == 0) {
        *pfn = (void *)cuGetProcAddress_v2;
        if (status) *status = 0;
        return OK;
    }
    pthread_mutex_lock(&lock);
    if (strlen(missing) + strlen(symbol) + 2 < sizeof(missing) && !strstr(missing, symbol)) {
        strcat(missing, symbol);
        strcat(missing, " ");
    }
    pthread_mutex_unlock(&lock);
    *pfn = NULL;
    if (status) *status = 1;  /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    return NOT_FOUND;
}
