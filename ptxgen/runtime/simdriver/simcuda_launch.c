/* simcuda_launch.c: the stand-in driver's modules, functions and launches, handed to Python
 * (ptxgen/runtime/simdriver/standin.py), which reads cubins and runs PTX on ptxgen.sim; and the
 * driver's error names and strings. See simcuda.c for the rest.
 */
#include <stdio.h>
#include "simcuda.h"

static load_cb_t py_load;
static unload_cb_t py_unload;
static getfn_cb_t py_getfn;
static fattr_get_cb_t py_fattr_get;
static fattr_set_cb_t py_fattr_set;
static launch_cb_t py_launch;
static occ_blocks_cb_t py_occ_blocks;
static occ_clusters_cb_t py_occ_clusters;

HIDDEN int simcuda_callbacks_set(void) { return py_launch != NULL; }

void simcuda_set_callbacks(load_cb_t l, unload_cb_t u, getfn_cb_t g, fattr_get_cb_t fg,
                           fattr_set_cb_t fs, launch_cb_t la) {
    py_load = l; py_unload = u; py_getfn = g; py_fattr_get = fg; py_fattr_set = fs; py_launch = la;
}

void simcuda_set_occupancy_callbacks(occ_blocks_cb_t blocks, occ_clusters_cb_t clusters) {
    py_occ_blocks = blocks; py_occ_clusters = clusters;
}

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
/* The driver JIT's log options (cuda.h CUjit_option): a buffer and its size in bytes (IN: the
 * capacity; OUT: the bytes written, stored back into the option value), and verbosity. */
enum { JIT_INFO_LOG = 3, JIT_INFO_LOG_SIZE = 4, JIT_ERROR_LOG = 5, JIT_ERROR_LOG_SIZE = 6,
       JIT_LOG_VERBOSE = 12 };

static __thread char jit_info[8192];  /* what the Python half's PTX JIT reports, per thread */
static __thread int jit_verbose;      /* CU_JIT_LOG_VERBOSE of the load in progress */

void simcuda_set_jit_info(const char *log) { snprintf(jit_info, sizeof(jit_info), "%s", log ? log : ""); }
int simcuda_jit_verbose(void) { return jit_verbose; }

static void fill_log(char *buf, void **size_slot, const char *text) {
    size_t cap = (size_t)(uintptr_t)*size_slot;
    if (!buf || cap == 0) return;
    size_t n = strlen(text);
    if (n >= cap) n = cap - 1;
    memcpy(buf, text, n);
    buf[n] = 0;
    *size_slot = (void *)(uintptr_t)n;
}

CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, int *opts, void **vals) {
    if (n && (!opts || !vals)) return INVALID_VALUE;
    char *info = NULL, *err = NULL;
    int info_size = -1, err_size = -1, verbose = 0;
    for (unsigned i = 0; i < n; i++) {
        switch (opts[i]) {
        case JIT_INFO_LOG: info = vals[i]; break;
        case JIT_ERROR_LOG: err = vals[i]; break;
        case JIT_INFO_LOG_SIZE: info_size = (int)i; break;
        case JIT_ERROR_LOG_SIZE: err_size = (int)i; break;
        case JIT_LOG_VERBOSE: verbose = (int)(uintptr_t)vals[i]; break;
        default: break;  /* other options tune code generation, which the simulator has none of */
        }
    }
    jit_info[0] = 0;
    jit_verbose = verbose;
    CUresult r = load(m, image);
    jit_verbose = 0;
    /* a buffer without its size option has size 0 (the option's default): nothing is written */
    if (info && info_size >= 0) fill_log(info, &vals[info_size], r == OK ? jit_info : "");
    if (err && err_size >= 0) fill_log(err, &vals[err_size], r == OK ? "" : simcuda_reason());
    return r;
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
    return py_launch((uint64_t)(uintptr_t)f, dims, smem, params, cluster, 0);
}

/* CUlaunchConfig / CUlaunchAttribute as the driver headers lay them out */
typedef struct { int id; int pad; union { unsigned char raw[64]; int flag; struct { unsigned x, y, z; } dim; } value; } LaunchAttribute;
struct LaunchConfig { unsigned gx, gy, gz, bx, by, bz, smem; CUstream stream; LaunchAttribute *attrs; unsigned nattrs; };

enum { ATTR_IGNORE = 0, ATTR_COOPERATIVE = 2, ATTR_CLUSTER_DIMENSION = 4, ATTR_PROGRAMMATIC_EVENT = 7,
       ATTR_LAUNCH_COMPLETION_EVENT = 12, ATTR_DEVICE_UPDATABLE_KERNEL_NODE = 13, ATTR_LAST = 18 };

static CUresult refuse_attribute(CUresult code, int id, const char *why) {
    char text[300];
    snprintf(text, sizeof(text), "cuLaunchKernelEx: launch attribute %d %s", id, why);
    simcuda_set_reason(text);
    fprintf(stderr, "[ptxgen sim driver] %s\n", text);
    return code;
}

/* What each CUlaunchAttributeID means here. Scheduling, cache, priority and memory-domain hints
 * (access policy window, synchronization policy, cluster scheduling, priority, memory sync domains,
 * preferred cluster, carveout, NVLink, portable-size and shared-memory modes) change no result, so
 * they are accepted and ignored; programmatic stream serialisation holds trivially because each
 * launch runs to completion. A cooperative launch is accepted and handed to Python, which refuses
 * a grid the device model cannot hold at once (COOPERATIVE_LAUNCH_TOO_LARGE) and records the
 * attribute. Events triggered from a kernel and graph-node attributes are refused (NOT_SUPPORTED:
 * the stand-in does not model them); an ID the driver does not define is INVALID_VALUE. */
static CUresult launch_attribute(const LaunchAttribute *a, uint32_t *cluster, int *cooperative) {
    switch (a->id) {
    case ATTR_CLUSTER_DIMENSION:
        cluster[0] = a->value.dim.x; cluster[1] = a->value.dim.y; cluster[2] = a->value.dim.z;
        return OK;
    case ATTR_COOPERATIVE:
        *cooperative = a->value.flag != 0;
        return OK;
    case ATTR_PROGRAMMATIC_EVENT: case ATTR_LAUNCH_COMPLETION_EVENT:
        return refuse_attribute(NOT_SUPPORTED, a->id, "(an event the kernel triggers) is not simulated");
    case ATTR_DEVICE_UPDATABLE_KERNEL_NODE:
        return refuse_attribute(INVALID_VALUE, a->id, "applies to graph kernel nodes, not stream launches");
    default:
        if (a->id < ATTR_IGNORE || a->id > ATTR_LAST || a->id == 15)
            return refuse_attribute(INVALID_VALUE, a->id, "is not a CUlaunchAttributeID");
        return OK;  /* a hint that changes no result */
    }
}

CUresult cuLaunchKernelEx(const LaunchConfig *cfg, CUfunction f, void **params, void **extra) {
    NEED_CONTEXT();
    if (!cfg) return INVALID_VALUE;
    CUresult r = check_stream(cfg->stream);
    if (r != OK) return r;
    if (extra != NULL || (cfg->nattrs && !cfg->attrs)) return INVALID_VALUE;
    uint32_t dims[6] = {cfg->gx, cfg->gy, cfg->gz, cfg->bx, cfg->by, cfg->bz}, cluster[3] = {1, 1, 1};
    int cooperative = 0;
    for (unsigned i = 0; i < cfg->nattrs; i++)
        if ((r = launch_attribute(&cfg->attrs[i], cluster, &cooperative)) != OK) return r;
    /* the cluster's checks (device support, size, grid divisibility) and the cooperative grid's
     * co-residency are the Python side's */
    return py_launch((uint64_t)(uintptr_t)f, dims, cfg->smem, params, cluster, cooperative);
}

/* ---- occupancy: answered by the Python side from the device model ------------------------- */
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction f, int threads, size_t smem,
                                                              unsigned flags) {
    NEED_CONTEXT();
    (void)flags;  /* the caching override changes nothing the model counts */
    if (!blocks || threads < 1 || !py_occ_blocks) return INVALID_VALUE;
    return py_occ_blocks((uint64_t)(uintptr_t)f, threads, (uint64_t)smem, blocks);
}
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction f, int threads, size_t smem) {
    return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(blocks, f, threads, smem, 0);
}
CUresult cuOccupancyMaxActiveClusters(int *clusters, CUfunction f, const LaunchConfig *cfg) {
    NEED_CONTEXT();
    if (!clusters || !cfg || !py_occ_clusters || (cfg->nattrs && !cfg->attrs)) return INVALID_VALUE;
    uint32_t dims[6] = {cfg->gx, cfg->gy, cfg->gz, cfg->bx, cfg->by, cfg->bz}, cluster[3] = {0, 0, 0};
    for (unsigned i = 0; i < cfg->nattrs; i++)
        if (cfg->attrs[i].id == ATTR_CLUSTER_DIMENSION) {
            cluster[0] = cfg->attrs[i].value.dim.x; cluster[1] = cfg->attrs[i].value.dim.y;
            cluster[2] = cfg->attrs[i].value.dim.z;
        }
    return py_occ_clusters((uint64_t)(uintptr_t)f, dims, cfg->smem, cluster, clusters);
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
    {720, "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", "too many blocks in cooperative launch"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {912, "CUDA_ERROR_INVALID_CLUSTER_SIZE", "invalid cluster size"},
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

