/* simcuda.h: what the stand-in driver's two halves share. simcuda.c keeps the bookkeeping (init,
 * devices, the primary context, memory, streams, events) and the cuGetProcAddress table;
 * simcuda_launch.c hands modules, functions and launches to Python and names the errors.
 */
#ifndef SIMCUDA_H
#define SIMCUDA_H

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
    NOT_SUPPORTED = 801, INVALID_CLUSTER_SIZE = 912, UNKNOWN = 999
};

#define SIM_DEVICE_BASE 0x7ff0000000000000ull
#define CTX_MAGIC 0x5C7Cu
#define STREAM_MAGIC 0x57EAu
#define EVENT_MAGIC 0xE7E7u

#define HIDDEN __attribute__((visibility("hidden")))  /* not exported from "libcuda.so.1" */

typedef struct { unsigned magic; int device; int retains; } Context;
extern HIDDEN int sim_initialized;
extern HIDDEN __thread Context *sim_current;

/* The rule every context-bound call obeys: init done, and a context current on this thread. */
#define NEED_CONTEXT() do { if (!sim_initialized) return NOT_INITIALIZED; \
    if (!sim_current || sim_current->retains <= 0) return INVALID_CONTEXT; } while (0)

HIDDEN CUresult check_stream(CUstream s);

/* Why the calling thread's last call was refused (both halves set it; Python reads it for
 * DriverError messages, since a CUresult alone hides which rule was broken). */
void simcuda_set_reason(const char *why);
const char *simcuda_reason(void);
/* What the PTX JIT (the Python half) reports in CU_JIT_INFO_LOG_BUFFER for the next load. */
void simcuda_set_jit_info(const char *log);
int simcuda_jit_verbose(void);  /* CU_JIT_LOG_VERBOSE of the load in progress */

/* callbacks into Python (simcuda_launch.c) */
typedef int (*load_cb_t)(const void *image, uint64_t len, int is_elf, uint64_t *module);
typedef int (*unload_cb_t)(uint64_t module);
typedef int (*getfn_cb_t)(uint64_t module, const char *name, uint64_t *fn);
typedef int (*fattr_get_cb_t)(uint64_t fn, int attr, int *value);
typedef int (*fattr_set_cb_t)(uint64_t fn, int attr, int value);
typedef int (*launch_cb_t)(uint64_t fn, const uint32_t *dims, uint32_t smem, void **params,
                           const uint32_t *cluster, int cooperative);
/* occupancy queries, answered from the device model (simdriver/occupancy.py) */
typedef int (*occ_blocks_cb_t)(uint64_t fn, int threads, uint64_t smem, int *blocks);
typedef int (*occ_clusters_cb_t)(uint64_t fn, const uint32_t *dims, uint32_t smem, const uint32_t *cluster,
                                 int *clusters);

HIDDEN int simcuda_callbacks_set(void);
void simcuda_set_callbacks(load_cb_t l, unload_cb_t u, getfn_cb_t g, fattr_get_cb_t fg,
                           fattr_set_cb_t fs, launch_cb_t la);
void simcuda_set_occupancy_callbacks(occ_blocks_cb_t blocks, occ_clusters_cb_t clusters);

/* entry points defined in simcuda_launch.c, for the table in simcuda.c */
typedef struct LaunchConfig LaunchConfig;
CUresult cuModuleLoadData(CUmodule *m, const void *image);
CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned n, int *opts, void **vals);
CUresult cuModuleUnload(CUmodule m);
CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name);
CUresult cuFuncGetAttribute(int *v, int attr, CUfunction f);
CUresult cuFuncSetAttribute(CUfunction f, int attr, int value);
CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned smem, CUstream s, void **params, void **extra);
CUresult cuLaunchKernelEx(const LaunchConfig *cfg, CUfunction f, void **params, void **extra);
CUresult cuGetErrorString(int code, const char **s);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *blocks, CUfunction f, int threads, size_t smem);
CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, CUfunction f, int threads, size_t smem,
                                                              unsigned flags);
CUresult cuOccupancyMaxActiveClusters(int *clusters, CUfunction f, const LaunchConfig *cfg);
/* simcuda_tensormap.c */
CUresult cuTensorMapEncodeTiled(void *map, int type, unsigned rank, void *address, const uint64_t *dims,
                                const uint64_t *strides, const uint32_t *box, const uint32_t *estrides,
                                int interleave, int swizzle, int l2, int oob);
CUresult cuGetErrorName(int code, const char **s);

#endif
