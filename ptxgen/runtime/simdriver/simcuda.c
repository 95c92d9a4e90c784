/* simcuda.c: a stand-in libcuda.so.1 that runs kernels on ptxgen's CPU simulator.
 *
 * Why: the real `cuda.bindings.driver` loads this library exactly as it loads NVIDIA's driver
 * (it finds "libcuda.so.1" already loaded and asks cuGetProcAddress_v2 for every entry point),
 * so every Python -> C argument conversion in ptxgen's runtime is the real one. This file keeps
 * the driver's bookkeeping (init, the device model, the primary context and which thread has it
 * current, "device memory", streams, events) and enforces the driver's rules for it; modules,
 * functions and launches are handed (simcuda_launch.c) to Python (simdriver/standin.py) through
 * callbacks, because reading cubins and running PTX is Python's job there.
 *
 * Device memory lives in host memory, but the addresses handed out lie in a non-canonical range
 * (SIM_DEVICE_BASE) that no host pointer can have: a host pointer passed where a device pointer
 * belongs, or the reverse, is caught instead of silently working.
 */
#include <stdio.h>
#include "simcuda.h"

/* ---- configuration, set from Python before cuInit (simcuda_configure) -------------------- */
typedef struct {
    char name[128];
    int attrs[160];          /* CUdevice_attribute -> value */
    uint64_t total_mem;
    int driver_version;      /* what cuDriverGetVersion reports, e.g. 13000 */
} DeviceModel;

static DeviceModel model;
static int configured = 0;
HIDDEN int sim_initialized = 0;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- contexts ----------------------------------------------------------------------------- */
static Context primary = {CTX_MAGIC, 0, 0};
HIDDEN __thread Context *sim_current = NULL;

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

HIDDEN CUresult check_stream(CUstream s) {
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
    if (sim_initialized) return INVALID_VALUE;   /* the model is fixed once cuInit ran */
    model = *m;
    configured = 1;
    return OK;
}

/* Host address and allocation bounds for a device pointer (what a launch's kernel may touch). */
int simcuda_translate(CUdeviceptr ptr, void **host, CUdeviceptr *base, uint64_t *size) {
    pthread_mutex_lock(&lock);
    Allocation *a = find(ptr, 0);
    if (a) { *host = a->host + (ptr - a->base); *base = a->base; *size = a->size; }
    pthread_mutex_unlock(&lock);
    return a ? OK : INVALID_VALUE;
}

int simcuda_context_is_current(void) { return sim_current != NULL && sim_current->retains > 0; }

/* ---- init, version, devices --------------------------------------------------------------- */
CUresult cuInit(unsigned flags) {
    if (flags != 0) return INVALID_VALUE;
    if (!configured || !simcuda_callbacks_set()) return NOT_INITIALIZED;  /* Python side never attached */
    sim_initialized = 1;
    return OK;
}

CUresult cuDriverGetVersion(int *v) {
    if (!v) return INVALID_VALUE;
    *v = model.driver_version;
    return OK;
}

CUresult cuDeviceGetCount(int *n) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (!n) return INVALID_VALUE;
    *n = 1;
    return OK;
}

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (!d) return INVALID_VALUE;
    if (ordinal != 0) return INVALID_DEVICE;
    *d = 0;
    return OK;
}

CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    if (!name || len <= 0) return INVALID_VALUE;
    strncpy(name, model.name, (size_t)len - 1);
    name[len - 1] = 0;
    return OK;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    if (!v || attr <= 0 || attr >= 160) return INVALID_VALUE;
    *v = model.attrs[attr];
    return OK;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    if (!bytes) return INVALID_VALUE;
    *bytes = model.total_mem;
    return OK;
}

/* ---- the primary context ------------------------------------------------------------------ */
CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice d) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    if (!ctx) return INVALID_VALUE;
    pthread_mutex_lock(&lock);
    primary.retains++;
    pthread_mutex_unlock(&lock);
    *ctx = &primary;
    return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (d != 0) return INVALID_DEVICE;
    pthread_mutex_lock(&lock);
    CUresult r = primary.retains > 0 ? (primary.retains--, OK) : INVALID_CONTEXT;
    pthread_mutex_unlock(&lock);
    return r;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (ctx == NULL) { sim_current = NULL; return OK; }
    if (ctx != &primary || primary.retains <= 0) return INVALID_CONTEXT;
    sim_current = &primary;
    return OK;
}

CUresult cuCtxGetCurrent(CUcontext *ctx) {
    if (!sim_initialized) return NOT_INITIALIZED;
    if (!ctx) return INVALID_VALUE;
    *ctx = sim_current;
    return OK;
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) { return cuCtxSetCurrent(ctx); }

CUresult cuCtxPopCurrent_v2(CUcontext *ctx) {
    NEED_CONTEXT();
    if (ctx) *ctx = sim_current;
    sim_current = NULL;
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
    if (!sim_initialized) return NOT_INITIALIZED;
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
    ENTRY("cuOccupancyMaxActiveBlocksPerMultiprocessor", cuOccupancyMaxActiveBlocksPerMultiprocessor),
    ENTRY("cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags", cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags),
    ENTRY("cuOccupancyMaxActiveClusters", cuOccupancyMaxActiveClusters),
    ENTRY("cuTensorMapEncodeTiled", cuTensorMapEncodeTiled),
    ENTRY("cuGetErrorString", cuGetErrorString), ENTRY("cuGetErrorName", cuGetErrorName),
};

static __thread char reason[512];

void simcuda_set_reason(const char *why) { snprintf(reason, sizeof(reason), "%s", why ? why : ""); }
const char *simcuda_reason(void) { return reason; }

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
